"""Grammar-constrained decoding backends behind one small interface (llguidance, xgrammar, outlines-core).

Choice, measured on this machine (2 CPU cores, torch 2.13 CPU, transformers 5.24, llguidance 1.9.1,
xgrammar 0.2.9, outlines-core 0.2.14) with ``benchmarks/bench_local_engine.py --grammar-backends``:

=============  =========  ===========  ============  =============  ==========================
backend        set-up     compile      mask+accept   64 rows/step   Likert answers valid
=============  =========  ===========  ============  =============  ==========================
llguidance     3.0 s      2.7 ms       77 us/token   0.9 ms         20/20 tiny, 8/8 128k vocab
xgrammar       0.8 s      38 ms        63 us/token   5.9 ms         20/20 tiny, 8/8 128k vocab
outlines-core  0.8 s      178 ms       1269 us/tok   88 ms          7/20 tiny, 0/8 128k vocab
=============  =========  ===========  ============  =============  ==========================

(128k vocabulary: a byte-level BPE trained offline on Python's stdlib source, ~117k learnt tokens, the size
of Llama 3's; set-up is once per model, compile once per schema; "64 rows/step" is one decoding step of a
64-row batch.) **llguidance** is the default: MIT licensed with no dependencies (~8 MB), schema compiles in
milliseconds, masks for a whole batch are computed in parallel threads, and it enforces ``minimum``/
``maximum``, ``enum``, ``anyOf``, ``$ref`` and arrays; ``{"type": "object"}`` serves ``json_object``.
**xgrammar** (Apache-2.0) is as correct and a little faster per single mask, but on Linux it pulls in triton
(~1 GB) and apache-tvm-ffi, compiles each schema ~15x slower and has no parallel batch fill here: second
choice. **outlines-core** (Apache-2.0) turns the schema into a regex that ignores integer bounds (ratings
like 61 or -1161010 pass), cannot express ``json_object`` and is slow per token: last resort. All three
import and run with transformers 5 and torch 2.13 (CPU).

Every backend writes the same bitmask format (int32 words, 32 tokens per word, least significant bit
first), so the decoder applies masks in one place.
"""


from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal, Protocol

logger = logging.getLogger("scijudge.lm.local")

GrammarKind = Literal["json_schema", "json_object"]
BACKEND_ORDER: tuple[str, ...] = ("llguidance", "xgrammar", "outlines-core")
# Compact one-line JSON with the separators Llama-style models write naturally; no free whitespace, so a weak
# model cannot loop on spaces or newlines inside the object.
ITEM_SEPARATOR = ", "
KEY_SEPARATOR = ": "


class GrammarError(ValueError):
    """A response_format the grammar backend cannot compile (bad or unsupported schema)."""


class Matcher(Protocol):
    """Per-sequence grammar state: fills a token mask, consumes tokens, says when the grammar is complete."""

    def fill_mask(self, bitmask: Any, index: int) -> None: ...

    def accept(self, token_id: int) -> bool: ...

    def is_done(self) -> bool: ...


@dataclass(frozen=True)
class GrammarSpec:
    """What to constrain to: a JSON schema (as canonical JSON text) or any JSON object."""

    kind: GrammarKind
    schema_json: str | None = None

    @classmethod
    def from_response_format(
        cls, response_format: dict[str, Any] | None, *, max_string_chars: int | None = None
    ) -> GrammarSpec | None:
        """Read an lm15 ``Config.response_format`` (``json_object`` or ``json_schema``); None when absent.

        ``max_string_chars`` caps every string in the schema that has no ``maxLength`` of its own, so a model
        that never closes its rationale still ends it (a random adapter otherwise writes to the token limit).
        """
        if not response_format:
            return None
        kind = response_format.get("type")
        if kind == "json_object":
            return cls("json_object")
        if kind == "json_schema":
            schema = response_format.get("schema")
            if not isinstance(schema, dict):
                raise GrammarError("response_format json_schema has no 'schema' object")
            if max_string_chars is not None:
                schema = bound_strings(schema, max_string_chars)
            return cls("json_schema", json.dumps(schema))  # key order is property order: keep it
        raise GrammarError(f"unsupported response_format type {kind!r}")


def bound_strings(schema: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """A copy of ``schema`` whose free strings (no maxLength, enum, const or pattern) get ``maxLength``."""
    if max_chars < 1:
        raise GrammarError(f"max_string_chars must be at least 1, got {max_chars}")

    def walk(part: Any) -> Any:
        if isinstance(part, list):
            return [walk(value) for value in part]
        if not isinstance(part, dict):
            return part
        out = {key: walk(value) for key, value in part.items()}
        kinds = out.get("type")
        is_string = kinds == "string" or (isinstance(kinds, list) and "string" in kinds)
        if is_string and not any(k in out for k in ("maxLength", "enum", "const", "pattern")):
            out["maxLength"] = max(max_chars, int(out.get("minLength", 0)))
        return out

    return walk(schema)


class GrammarBackend:
    """Base class: one backend bound to one tokenizer, with an LRU cache of compiled grammars."""

    name = "none"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.stop_ids = list(stop_ids)
        self._cache: OrderedDict[GrammarSpec, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._closer: Any = None

    def compiled(self, spec: GrammarSpec) -> Any:
        """Compile ``spec`` once and reuse it (schemas repeat across every judgment of a rubric)."""
        with self._lock:
            if spec in self._cache:
                self._cache.move_to_end(spec)
                return self._cache[spec]
        grammar = self._compile(spec)
        with self._lock:
            self._cache[spec] = grammar
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return grammar

    @property
    def closer(self) -> Any:
        """The forced-closing helper for this tokenizer (built on first use, ~1 s on a 128k vocabulary)."""
        with self._lock:
            if self._closer is None:
                from scijudge.lm._closing import Closer

                self._closer = Closer(self.tokenizer, self.vocab_size, self.stop_ids)
            return self._closer

    def matcher(self, spec: GrammarSpec) -> Matcher:
        """A fresh matcher for one sequence."""
        return self._matcher(self.compiled(spec))

    def fill_masks(self, matchers: list[tuple[Matcher, int]], bitmask: Any) -> None:
        """Fill the rows of ``bitmask`` for several sequences (backends may do this in parallel)."""
        for matcher, index in matchers:
            matcher.fill_mask(bitmask, index)

    def _compile(self, spec: GrammarSpec) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _matcher(self, compiled: Any) -> Matcher:  # pragma: no cover - abstract
        raise NotImplementedError


# --------------------------------------------------------------------------------------------- llguidance


class _LLGuidanceMatcher:
    """An llguidance LLMatcher behind the Matcher protocol."""

    def __init__(self, matcher: Any, fill: Any) -> None:
        self.inner = matcher
        self._fill = fill

    def fill_mask(self, bitmask: Any, index: int) -> None:
        self._fill(self.inner, bitmask, index)

    def accept(self, token_id: int) -> bool:
        ok = bool(self.inner.consume_token(token_id))
        return ok and not self.inner.is_error()

    def is_done(self) -> bool:
        return bool(self.inner.is_stopped())


def _check_bitmask(bitmask: Any) -> None:
    # A wrong pointer or size is memory corruption: the same checks as llguidance.torch's wrappers.
    if bitmask.dtype != _torch().int32 or not bitmask.is_cpu or bitmask.dim() != 2:
        raise ValueError("the grammar bitmask must be a 2-D int32 tensor on the CPU")


def fill_bitmask_row(matcher: Any, bitmask: Any, index: int = 0) -> None:
    """Write an llguidance matcher's next-token mask into row ``index`` (``llguidance.torch.fill_next_token_bitmask``
    without importing that module)."""
    _check_bitmask(bitmask)
    row = bitmask[index, :]
    if not row.is_contiguous():
        raise ValueError("the grammar bitmask row must be contiguous")
    matcher.unsafe_compute_mask_ptr(row.data_ptr(), row.numel() * row.element_size())


def fill_bitmask_rows(executor: Any, matchers: list[tuple[Any, int]], bitmask: Any) -> None:
    """Fill several rows in parallel with an ``LLExecutor`` (``llguidance.torch.fill_next_token_bitmask_par``)."""
    _check_bitmask(bitmask)
    if not bitmask.is_contiguous():
        raise ValueError("the grammar bitmask must be contiguous")
    batch, words = bitmask.shape
    if any(not 0 <= index < batch for _, index in matchers):
        raise ValueError("a grammar bitmask row index is out of range")
    executor.unsafe_compute_mask_ptr(matchers, bitmask.data_ptr(), words * 4, batch)


def _torch() -> Any:
    import torch

    return torch


class LLGuidanceBackend(GrammarBackend):
    """llguidance: lazy per-token masks from an Earley parser over a lexer; MIT licensed."""

    name = "llguidance"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        super().__init__(tokenizer, vocab_size, stop_ids)
        import llguidance
        import llguidance.hf  # not llguidance.torch: its module-level @torch.compile imports torch._inductor (1.1-1.4 s)

        self._ll = llguidance
        self._fill = fill_bitmask_row
        self._fill_par = fill_bitmask_rows
        self._lltok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=self.stop_ids)
        self._executor: Any = None

    def _compile(self, spec: GrammarSpec) -> str:
        options: Any = {  # llguidance.JsonCompileOptions (a TypedDict)
            "whitespace_flexible": False,
            "item_separator": ITEM_SEPARATOR,
            "key_separator": KEY_SEPARATOR,
        }
        schema: Any = spec.schema_json if spec.kind == "json_schema" else {"type": "object"}
        try:
            grammar = self._ll.LLMatcher.grammar_from_json_schema(schema, defaults=options)
        except ValueError as exc:
            raise GrammarError(f"llguidance cannot read the JSON schema: {exc}") from exc
        is_error, messages = self._ll.LLMatcher.validate_grammar_with_warnings(grammar, self._lltok)
        if is_error:
            raise GrammarError(f"llguidance cannot compile the JSON schema: {messages[0] if messages else ''}")
        return grammar

    def _matcher(self, compiled: str) -> Matcher:
        inner = self._ll.LLMatcher(self._lltok, compiled, log_level=0)
        if inner.is_error():
            raise GrammarError(f"llguidance rejected the grammar: {inner.get_error()}")
        return _LLGuidanceMatcher(inner, self._fill)

    def fill_masks(self, matchers: list[tuple[Matcher, int]], bitmask: Any) -> None:
        if len(matchers) < 4:
            return super().fill_masks(matchers, bitmask)
        if self._executor is None:
            self._executor = self._ll.LLExecutor()
        self._fill_par(self._executor, [(m.inner, i) for m, i in matchers], bitmask)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------------------------- xgrammar


class _XGrammarMatcher:
    """An xgrammar GrammarMatcher behind the Matcher protocol."""

    def __init__(self, matcher: Any) -> None:
        self.inner = matcher

    def fill_mask(self, bitmask: Any, index: int) -> None:
        self.inner.fill_next_token_bitmask(bitmask, index)

    def accept(self, token_id: int) -> bool:
        return bool(self.inner.accept_token(token_id))

    def is_done(self) -> bool:
        return bool(self.inner.is_terminated())


class XGrammarBackend(GrammarBackend):
    """xgrammar: pushdown automaton with a precomputed per-grammar token mask cache; Apache-2.0."""

    name = "xgrammar"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        super().__init__(tokenizer, vocab_size, stop_ids)
        import xgrammar

        self._xgr = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=self.stop_ids)
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=2, cache_enabled=False)

    def _compile(self, spec: GrammarSpec) -> Any:
        schema = spec.schema_json if spec.kind == "json_schema" else json.dumps({"type": "object"})
        try:
            return self._compiler.compile_json_schema(
                schema, any_whitespace=False, separators=(ITEM_SEPARATOR, KEY_SEPARATOR), strict_mode=True
            )
        except Exception as exc:  # xgrammar raises RuntimeError/ValueError subclasses for unsupported schemas
            raise GrammarError(f"xgrammar cannot compile the JSON schema: {exc}") from exc

    def _matcher(self, compiled: Any) -> Matcher:
        return _XGrammarMatcher(self._xgr.GrammarMatcher(compiled))


# ------------------------------------------------------------------------------------------- outlines-core


class _OutlinesMatcher:
    """An outlines-core Guide behind the Matcher protocol."""

    def __init__(self, guide: Any, stop_ids: list[int]) -> None:
        self.inner = guide
        self._stop_ids = stop_ids
        self._stopped = False

    def fill_mask(self, bitmask: Any, index: int) -> None:
        row = bitmask[index]  # contiguous int32 row: outlines-core writes the packed mask in place
        self.inner.write_mask_into(row.data_ptr(), row.numel(), row.element_size())

    def accept(self, token_id: int) -> bool:
        if token_id in self._stop_ids:
            self._stopped = True
            return bool(self.inner.is_finished())
        try:
            self.inner.advance(token_id)
        except Exception:  # outlines-core raises ValueError on a token outside the index
            return False
        return True

    def is_done(self) -> bool:
        return self._stopped


class OutlinesCoreBackend(GrammarBackend):
    """outlines-core: JSON schema -> regex -> token-level DFA index; Apache-2.0; no json_object."""

    name = "outlines-core"

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        super().__init__(tokenizer, vocab_size, stop_ids)
        import outlines_core

        self._oc = outlines_core
        specials = set(getattr(tokenizer, "all_special_ids", []) or [])
        mapping: dict[bytes, list[int]] = {}
        for token, token_id in tokenizer.get_vocab().items():
            if token_id in specials or token_id >= vocab_size:
                continue
            mapping.setdefault(_token_bytes(tokenizer, token), []).append(token_id)
        mapping.pop(b"", None)
        self._vocabulary = outlines_core.Vocabulary(self.stop_ids[0], mapping)

    def _compile(self, spec: GrammarSpec) -> Any:
        if spec.kind != "json_schema":
            raise GrammarError("outlines-core cannot constrain to an arbitrary JSON object (json_object)")
        try:
            regex = self._oc.json_schema.build_regex_from_schema(spec.schema_json, whitespace_pattern="[ ]?")
            return self._oc.Index(regex, self._vocabulary)
        except Exception as exc:
            raise GrammarError(f"outlines-core cannot compile the JSON schema: {exc}") from exc

    def _matcher(self, compiled: Any) -> Matcher:
        return _OutlinesMatcher(self._oc.Guide(compiled), self.stop_ids)


def _token_bytes(tokenizer: Any, token: str) -> bytes:
    """The bytes a vocabulary entry stands for (byte-level BPE symbols and <0xNN> byte tokens decoded)."""
    if token.startswith("<0x") and token.endswith(">") and len(token) == 6:
        return bytes([int(token[3:5], 16)])
    return tokenizer.convert_tokens_to_string([token]).encode("utf-8")


_BACKENDS: dict[str, type[GrammarBackend]] = {
    "llguidance": LLGuidanceBackend,
    "xgrammar": XGrammarBackend,
    "outlines-core": OutlinesCoreBackend,
}
_MODULES = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}


def installed_backends() -> list[str]:
    """Names of the grammar backends importable here, in order of preference."""
    import importlib.util

    return [name for name in BACKEND_ORDER if importlib.util.find_spec(_MODULES[name]) is not None]


def make_backend(name: str | None, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> GrammarBackend | None:
    """Build the named backend, or the first installed one when ``name`` is None; None means unconstrained.

    ``name="none"`` turns constrained decoding off on purpose. An unknown or uninstalled name is an error.
    """
    if name == "none":
        return None
    if name is not None:
        if name not in _BACKENDS:
            raise ValueError(f"unknown grammar backend {name!r}; choose one of {', '.join(BACKEND_ORDER)} or 'none'")
        if name not in installed_backends():
            raise ImportError(f"grammar backend {name!r} is not installed: pip install {_MODULES[name]}")
        return _BACKENDS[name](tokenizer, vocab_size, stop_ids)
    available = installed_backends()
    if not available:
        logger.warning(
            "no grammar backend is installed (llguidance, xgrammar or outlines-core): response_format requests "
            "are decoded WITHOUT constraints and may not be valid JSON; pip install llguidance"
        )
        return None
    return _BACKENDS[available[0]](tokenizer, vocab_size, stop_ids)
