"""One loaded base model (plus its LoRA adapters) shared by every local engine that uses it.

A runtime owns the model, the tokenizer, the grammar backends and the batch worker. Engines for the same base
folder, dtype and device map share one runtime: two judges with different adapters load the base once. A
single adapter is merged into the weights while it is the base's only user; with several users the adapters
stay unmerged and the batch worker switches between them per batch.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from scijudge.errors import ModelError
from scijudge.lm._batching import Batcher
from scijudge.lm._decode import Row, RowResult, decode_batch
from scijudge.lm._grammar import GrammarBackend, make_backend
from scijudge.lm._prefix import PrefixStore
from scijudge.lm.decision import DecideRow, decide_batch
from scijudge.lm._models import (
    ModelRef,
    check_adapter_weights,
    device_settings,
    weight_files,
)
from scijudge.lm._extra import require_peft, require_torch

logger = logging.getLogger("scijudge.lm.local")


class Runtime:
    """One loaded base model (plus its adapters) shared by every engine that uses it, with one batch worker."""

    def __init__(self, base: Path, dtype: str, device_map: Any, *, preloaded: tuple[Any, Any] | None = None) -> None:
        torch, transformers = require_torch()
        self.base = base
        self.torch = torch
        self.lock = threading.RLock()
        self.adapters: dict[Path, str] = {}
        self.users: Counter[str | None] = Counter()
        self.merge_wanted: dict[str, bool] = {}
        self.merged: str | None = None
        self.peft = False
        self._grammars: dict[str | None, GrammarBackend | None] = {}
        self._grammar_lock = threading.Lock()  # not self.lock: callers must not wait for a running batch
        self._tokenizer_lock = threading.Lock()  # fast tokenizers can refuse concurrent use ("Already borrowed")
        self._token_text: dict[int, str] = {}
        self.pinned = preloaded is not None  # an in-memory model stays until the process ends
        if preloaded is not None:
            model, self.tokenizer = preloaded
        else:
            self.tokenizer, model = self._load(base, dtype, device_map, torch, transformers)
        self.model = model.eval()
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        stops: set[int] = set()
        for source in (self.tokenizer.eos_token_id, getattr(model.generation_config, "eos_token_id", None)):
            if isinstance(source, int):
                stops.add(source)
            elif isinstance(source, (list, tuple)):
                stops.update(int(s) for s in source)
        self.stop_ids = sorted(stops)
        self.context = self._context_window()
        self.batcher = Batcher(self._run_batch, name=f"scijudge-local:{base.name}")
        self.prefixes = PrefixStore()  # prompt prefixes' KV kept across batches (an item's other rubrics)
        self._warned_template = False

    @staticmethod
    def _load(base: Path, dtype: str, device_map: Any, torch: Any, transformers: Any) -> tuple[Any, Any]:
        """Load tokenizer and model from a local folder, never from the network."""
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(base), local_files_only=True)
        except Exception as exc:
            raise ModelError(f"cannot load the tokenizer in {base}: {type(exc).__name__}: {exc}") from exc
        kwargs: dict[str, Any] = {"local_files_only": True, "low_cpu_mem_usage": True}
        major_minor = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
        kwargs["dtype" if major_minor >= (4, 56) else "torch_dtype"] = getattr(torch, dtype)
        if device_map is not None:
            kwargs["device_map"] = device_map
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(str(base), **kwargs)
        except Exception as exc:
            raise ModelError(
                f"cannot load the model weights in {base} ({weight_files(base)}): {type(exc).__name__}: {exc}"
            ) from exc
        return tokenizer, model

    def _context_window(self) -> int | None:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        tok_limit = getattr(self.tokenizer, "model_max_length", None)
        candidates = [x for x in (limit, tok_limit) if isinstance(x, int) and 0 < x < 10_000_000]
        return min(candidates) if candidates else None

    # -- grammar -------------------------------------------------------------------------------------

    def grammar(self, name: str | None) -> GrammarBackend | None:
        """The named grammar backend (None: first installed), built on first use (llguidance: ~1 s per tokenizer)."""
        with self._grammar_lock:
            if name not in self._grammars:
                vocab = int(self.model.get_output_embeddings().weight.shape[0])
                try:
                    self._grammars[name] = make_backend(name, self.tokenizer, vocab, self.stop_ids)
                except (ImportError, ValueError) as exc:
                    raise ModelError(str(exc)) from exc
            return self._grammars[name]

    # -- adapters ------------------------------------------------------------------------------------

    def attach(self, adapter: Path | None, merge: bool) -> str | None:
        """Register a user of the base (adapter None) or of an adapter; loads the adapter once."""
        with self.lock:
            name = None
            if adapter is not None:
                name = self.adapters.get(adapter)
                if name is None:
                    name = f"adapter_{len(self.adapters)}"
                    self._load_adapter(adapter, name)
                    self.adapters[adapter] = name
                self.merge_wanted[name] = self.merge_wanted.get(name, True) and merge and mergeable(self.model, name)
            self.users[name] += 1
            self._update_merge()
            return name

    def detach(self, name: str | None) -> bool:
        """Drop one user; True when nobody uses this runtime any more.

        The merge state is brought up to date before the next batch, not here: a finalizer may call this
        from any thread, even the batch worker in the middle of a decode.
        """
        with self.lock:
            self.users[name] -= 1
            if self.users[name] <= 0:
                del self.users[name]
            return not self.users

    def _load_adapter(self, adapter: Path, name: str) -> None:
        peft = require_peft()
        check_adapter_weights(adapter)  # before peft injects layers into the shared base
        self._unmerge()
        try:
            if not self.peft:
                self.model = peft.PeftModel.from_pretrained(
                    self.model, str(adapter), adapter_name=name, is_trainable=False
                )
                self.peft = True
            else:
                self.model.load_adapter(str(adapter), adapter_name=name, is_trainable=False)
        except Exception as exc:
            raise ModelError(
                f"cannot load the adapter in {adapter} ({weight_files(adapter)}) onto {self.base}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self.model.eval()

    def _update_merge(self) -> None:
        """Merge the adapter when it is the only thing this base serves; unmerge as soon as it is not."""
        groups = [g for g, n in self.users.items() if n > 0]
        target = groups[0] if len(groups) == 1 and groups[0] is not None and self.merge_wanted.get(groups[0]) else None
        if target == self.merged:
            return
        self._unmerge()
        if target is not None:
            self.model.set_adapter(target)
            self.model.base_model.merge_adapter()
            self.merged = target
            logger.info("merged LoRA adapter %s into %s", target, self.base)

    def _unmerge(self) -> None:
        if self.merged is not None:
            self.model.base_model.unmerge_adapter()
            self.merged = None

    # -- prompts -------------------------------------------------------------------------------------

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the chat prompt, through the tokenizer's chat template (with a plain fallback)."""
        return self.chat_prompt(messages)[1]

    def chat_prompt(self, messages: list[dict[str, str]]) -> tuple[str, list[int]]:
        """The chat prompt's text (up to where the assistant answers) and its token ids. A final assistant
        message is a prefill: the assistant's answer starts with its text (e.g. a native answer's opening)."""
        if messages and messages[-1]["role"] == "assistant":
            text, _ = self.chat_prompt(messages[:-1])
            text += messages[-1]["content"]
            return text, self.encode_text(text)
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            try:
                text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            except Exception:
                merged = fold_system(messages)
                text = tok.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)
            return text, self.encode_text(text)
        if not self._warned_template:
            logger.warning("tokenizer in %s has no chat template; using a plain 'Role: text' prompt", self.base)
            self._warned_template = True
        text = "".join(f"{m['role'].capitalize()}: {m['content']}\n\n" for m in messages) + "Assistant:"
        with self._tokenizer_lock:
            return text, list(tok(text)["input_ids"])

    def encode_text(self, text: str) -> list[int]:
        """Token ids of text that already holds its special tokens (a rendered chat template)."""
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def token_text(self, token_id: int) -> str:
        """The text of one token (cached)."""
        text = self._token_text.get(token_id)
        if text is None:
            with self._tokenizer_lock:
                text = self.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self._token_text[token_id] = text
        return text

    def detokenize(self, ids: list[int]) -> str:
        """Generated token ids to text (special tokens dropped)."""
        with self._tokenizer_lock:
            return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    # -- batches -------------------------------------------------------------------------------------

    def _run_batch(self, group: Any, rows: Sequence[Any]) -> list[Any]:
        # decision jobs are queued under (adapter, "decide") so that a batch never mixes them with generation
        adapter = group[0] if isinstance(group, tuple) else group
        with self.lock:
            self._update_merge()
            if self.peft and adapter is None:
                context: Any = self.model.disable_adapter()
            else:
                if self.peft and self.merged != adapter:
                    self.model.set_adapter(adapter)
                context = nullcontext()
            store = self.prefixes if self.prefixes.budget > 0 else None
            if store is not None:
                store.use((adapter, self.merged, id(self.model)))  # KV of other weights is not this model's
            with context:
                if rows and isinstance(rows[0], DecideRow):  # decision rows: prefill only (scijudge.lm.decision)
                    return decide_batch(self.model, rows, pad_id=self.pad_id, store=store)
                return self._decode_splitting_on_oom(rows, store)

    def _decode_splitting_on_oom(self, rows: Sequence[Row], store: PrefixStore | None = None) -> list[RowResult]:
        try:
            return decode_batch(
                self.model, rows, stop_ids=self.stop_ids, pad_id=self.pad_id, detokenize=self.detokenize, store=store
            )
        except self.torch.OutOfMemoryError:
            if len(rows) == 1:
                raise
            if self.torch.cuda.is_available():
                self.torch.cuda.empty_cache()
            half = len(rows) // 2
            logger.warning("out of memory on a batch of %d; retrying as %d + %d", len(rows), half, len(rows) - half)
            return self._decode_splitting_on_oom(rows[:half], store) + self._decode_splitting_on_oom(rows[half:], store)

    def shutdown(self) -> None:
        self.batcher.close()
        self.model = None
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()


def fold_system(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Put a system message in front of the first user message, for templates without a system role."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    elif system:
        rest.insert(0, {"role": "user", "content": system})
    return rest


_RUNTIMES: dict[tuple[str, str, str], Runtime] = {}
_RUNTIMES_LOCK = threading.RLock()  # re-entrant: an engine's finalizer may run while it is held


def runtime_key(base: Path, dtype: str, device_map: Any) -> tuple[str, str, str]:
    return (str(base), dtype, json.dumps(device_map, sort_keys=True, default=str))


def acquire(ref: ModelRef, dtype: str, device_map: Any, merge: bool) -> tuple[Runtime, str | None]:
    """Get (loading if needed) the shared runtime for the base model and attach this user to it."""
    key = runtime_key(ref.base, dtype, device_map)
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            runtime = Runtime(ref.base, dtype, device_map)
            _RUNTIMES[key] = runtime
        try:
            return runtime, runtime.attach(ref.adapter, merge)
        except BaseException:
            if not runtime.users and not runtime.pinned:
                del _RUNTIMES[key]
                runtime.shutdown()
            raise


def preload(folder: str | Path, model: Any, tokenizer: Any, *, dtype: Any = None, device_map: Any = None) -> None:
    """Use an in-memory model for ``hf:<folder>`` (benchmarks with random large weights; nothing is saved).

    ``folder`` must exist (it may hold only a config); ``dtype`` and ``device_map`` must match what
    ``local_lm`` is later called with, since they are part of the shared-model key.
    """
    base = Path(folder).expanduser().resolve()
    dtype_name, device_map = device_settings(dtype, device_map)
    key = runtime_key(base, dtype_name, device_map)
    with _RUNTIMES_LOCK:
        if key in _RUNTIMES:
            raise ModelError(f"a model for {base} with these settings is already loaded")
        _RUNTIMES[key] = Runtime(base, dtype_name, device_map, preloaded=(model, tokenizer))


def release(key: tuple[str, str, str], adapter: str | None) -> None:
    """Detach one user; unload the runtime when it has none left."""
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            return
        if runtime.detach(adapter) and not runtime.pinned:
            del _RUNTIMES[key]
            runtime.shutdown()


def mergeable(model: Any, adapter_name: str) -> bool:
    """Whether merging this adapter into the base serves the same model as leaving it unmerged. Not when it trains
    rows of an output layer that the base ties to its input embeddings (a distilled student's level rows on a
    GPT-2- or Qwen3-style base): peft's merge writes the delta into the shared matrix, so the level tokens' input
    embeddings change too (huggingface/peft#2972) and the merged student judges otherwise than it was trained."""
    config = getattr(model, "peft_config", {}).get(adapter_name)
    if config is None or not getattr(config, "trainable_token_indices", None):
        return True
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model_config: Any = getattr(base, "config", None)
    text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    return not bool(getattr(text, "tie_word_embeddings", False))

