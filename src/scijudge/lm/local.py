"""Local judges: a transformers + PEFT model run in-process as a DSPy 3.4 LM engine.

``local_lm("hf:<model>")`` returns a ``dspy.LM`` whose engine (:class:`LocalEngine`) answers canonical
``dspy.lm15`` requests with a local causal LM:

* Model strings: ``hf:<folder or hub id>`` (a base model, or a PEFT adapter whose ``adapter_config.json``
  names its base), ``hf:<base>+<adapter>``. Nothing is ever downloaded: folders are read as they are and hub
  ids only from the local Hugging Face cache (``local_files_only``).
* dtype per device (bfloat16 on CUDA and on CPUs with native bf16, else float32; overridable), ``device_map``, the tokenizer's chat
  template, the request's temperature (0 or unset = greedy), ``max_tokens`` (``finish_reason="length"`` when
  it runs out), stop sequences, top_p/top_k/seed, and token logprobs with top-k alternatives.
* Structured output by construction: ``response_format`` ``json_schema`` is enforced by grammar-constrained
  decoding and ``json_object`` by a generic JSON-object grammar, so every completed answer parses.
  Backend: **llguidance** (MIT, dependency-free) by default, then xgrammar, then outlines-core; see
  :mod:`scijudge.lm._grammar` for the measurements behind the choice (llguidance and xgrammar both produced
  only valid answers at ~60-80 us of mask work per token on a 128k vocabulary; llguidance compiles schemas
  in ~3 ms against ~40 ms, fills a 64-row batch's masks in parallel in <1 ms, and needs no triton;
  outlines-core ignores integer bounds and cannot do ``json_object``). ``grammar="xgrammar"`` picks
  another. With no backend installed, requests are decoded unconstrained and a warning says so. A token
  budget (``max_tokens``) that runs out mid-answer still truncates: ``finish_reason`` is then ``"length"``.
* Dynamic batching: concurrent ``complete`` calls from threads (judge runners, ``dspy.Parallel``) and async
  calls are grouped into one batched decode (``max_batch_size``, ``max_wait_ms``); prompts are left-padded
  with explicit position ids, and a prompt prefix shared by several rows (the judge's system prompt) is
  computed once. Batched greedy output equals unbatched greedy output.
* Adapters: one LoRA adapter alone on its base is merged into the weights (reversibly) for speed; several
  adapters on one base (two judges) share the loaded base and switch per batch with peft's ``set_adapter``.
* Errors: a missing model, an adapter whose base is missing, a corrupt weight file or a missing extra raise
  :class:`scijudge.errors.ModelError` when the LM is built. A prompt longer than the context window raises
  ``dspy.lm15.ContextLengthError`` inside the engine, which DSPy surfaces as
  ``dspy.utils.exceptions.ContextWindowExceededError`` (an ``LMInvalidRequestError``); a schema the grammar
  backend cannot compile raises ``dspy.lm15.InvalidRequestError`` (DSPy: ``LMInvalidRequestError``), so a
  fallback chain can move on to ``json_object``.

Logprobs: ``dspy.LM(..., logprobs=True, top_logprobs=5)`` (or the same keywords on ``local_lm``) puts the
scores on the ``Response`` (``response.logprobs``), in ``lm.history[-1]["outputs"][0]["logprobs"]["content"]``
and, through DSPy's adapters, on the prediction as ``prediction.logprobs["content"]`` (OpenAI's shape). The
reported logprobs are those of the distribution the token was drawn from after the grammar mask, at
temperature 1, so at a rating position they cover exactly the ratings the schema allows.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
import weakref
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import Any

from scijudge.errors import ModelError
from scijudge.lm._decode import Row, RowResult
from scijudge.lm._grammar import GrammarError, GrammarSpec
from scijudge.lm._models import ModelRef, device_settings, dtype_name, parse_model_string
from scijudge.lm._runtime import acquire, preload, release, runtime_key

__all__ = ["AsyncLocalEngine", "LocalEngine", "ModelRef", "local_lm", "parse_model_string", "preload"]

logger = logging.getLogger("scijudge.lm.local")

DEFAULT_MAX_TOKENS = 1024
# A judge's rationale needs a few sentences; a model that never closes its strings stops here (~150 words).
DEFAULT_MAX_STRING_CHARS = 800


def _chat_messages(request: Any) -> list[dict[str, str]]:
    """The request as chat-template messages; refuses parts a text-only local model cannot read."""
    from dspy.lm15 import UnsupportedFeatureError

    messages: list[dict[str, str]] = []
    system = request.system
    if system is not None:
        text = system if isinstance(system, str) else "".join(getattr(p, "text", "") or "" for p in system)
        messages.append({"role": "system", "content": text})
    for index, message in enumerate(request.messages):
        texts = []
        for part_index, part in enumerate(message.parts):
            kind = getattr(part, "type", "")
            if kind == "text":
                texts.append(part.text)
            elif kind == "thinking":
                continue
            else:
                raise UnsupportedFeatureError(
                    f"the local engine reads text only; messages[{index}].parts[{part_index}] is {kind!r}",
                    feature=f"messages[{index}].parts[{part_index}]", provider="hf",
                )
        role = {"developer": "system"}.get(message.role, message.role)
        messages.append({"role": role, "content": "".join(texts)})
    return messages


PREFIX_KEY_TOKENS = 64  # without a system prompt, rows whose prompts open with the same tokens share a prefix


def _prefix_key(messages: list[dict[str, str]], input_ids: list[int]) -> str:
    """Which queued requests should share a batch because their prompts share a prefix.

    Rubric first (a system prompt): the same system prompt, i.e. the same rubric, across items. Item first (no
    system prompt; see ``scijudge.judges.layout``): the same opening tokens, i.e. the same item, across rubrics.
    """
    if messages and messages[0]["role"] == "system":
        return "system:" + hashlib.sha1(messages[0]["content"].encode("utf-8")).hexdigest()
    opening = ",".join(map(str, input_ids[:PREFIX_KEY_TOKENS]))
    return "opening:" + hashlib.sha1(opening.encode("ascii")).hexdigest()


# ------------------------------------------------------------------------------------------------ engine


class LocalEngine:
    """A DSPy 3.4 engine (``complete(Request) -> Response``) running a local transformers/PEFT model."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(
        {"temperature", "max_tokens", "top_p", "top_k", "stop", "seed", "logprobs", "top_logprobs", "response_format"}
    )

    def __init__(
        self,
        model: str,
        *,
        dtype: str | None = None,
        device_map: Any = None,
        max_batch_size: int = 8,
        max_wait_ms: float = 10,
        merge_adapter: bool = True,
        grammar: str | None = None,
        max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS,
        force_close: bool = True,
        prefix_cache_mb: int | None = None,
    ) -> None:
        """Resolve ``model`` offline and load it (shared with other engines on the same base and settings).

        Args:
            model: ``hf:<folder or cached hub id>``, ``hf:<adapter>`` or ``hf:<base>+<adapter>``.
            dtype: float32 / bfloat16 / float16; default (``SCIJUDGE_LOCAL_DTYPE`` if set) bfloat16 on CUDA and
                on CPUs with native bf16 (AMX or AVX-512 BF16), float32 on other CPUs; recorded in each
                judgment's decoding settings unless float32.
            device_map: passed to ``from_pretrained``; default ``"auto"`` on CUDA, none (CPU) otherwise.
            max_batch_size: most requests decoded together.
            max_wait_ms: how long the first queued request waits for others to join its batch.
            merge_adapter: merge a LoRA adapter into the base weights while it is the base's only user.
            grammar: ``llguidance`` | ``xgrammar`` | ``outlines-core`` | ``none``; default: first installed.
            max_string_chars: ``maxLength`` given to every schema string that has none (None: no cap).
            force_close: when a constrained answer's budget is nearly spent, force the shortest valid ending,
                so it parses instead of being cut off at ``max_tokens``.
            prefix_cache_mb: memory for prompt prefixes' KV kept across batches (``scijudge.lm._prefix``; an
                item's prefix is computed once for all its rubrics); 0 turns the reuse off; default 512 (the
                model's shared setting: the last engine that sets it wins).
        """
        if max_batch_size < 1:
            raise ModelError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self.model = model
        self.ref = parse_model_string(model)
        self.dtype, self.device_map = device_settings(dtype, device_map)
        self.max_batch_size = int(max_batch_size)
        self.max_wait_ms = float(max_wait_ms)
        self.merge_adapter = bool(merge_adapter)
        self.grammar = grammar
        if max_string_chars is not None and int(max_string_chars) < 1:
            raise ModelError(f"max_string_chars must be at least 1 (or None for no cap), got {max_string_chars}")
        self.max_string_chars = int(max_string_chars) if max_string_chars is not None else None
        self.force_close = bool(force_close)
        self.max_decide_rows = 64  # decision rows per batch (prefill only: many more fit than decoding rows)
        # Saved as asked (None = "the default of the machine that loads it"), in JSON-safe form.
        self._settings = {
            "dtype": None if dtype in (None, "auto") else dtype_name(dtype, on_cuda=False),
            "device_map": json.loads(json.dumps(device_map, default=str)),
        }
        self._runtime, self._adapter = acquire(self.ref, self.dtype, self.device_map, self.merge_adapter)
        self._key = runtime_key(self.ref.base, self.dtype, self.device_map)
        try:
            self._runtime.grammar(grammar)  # an unknown or uninstalled backend fails here, not on the first call
        except ModelError:
            release(self._key, self._adapter)
            raise
        self._finalizer = weakref.finalize(self, release, self._key, self._adapter)
        self.prefix_cache_mb = prefix_cache_mb
        if prefix_cache_mb is not None:
            self._runtime.prefixes.budget = max(0, int(prefix_cache_mb)) << 20

    # -- DSPy engine protocol ------------------------------------------------------------------------

    def complete(self, request: Any) -> Any:
        """Answer one canonical request (blocks while it waits for, and runs in, a batch)."""
        return self.submit(request).result()

    def stream(self, request: Any) -> Iterator[Any]:
        """Stream events of a completed answer (the local engine produces the whole answer first)."""
        from dspy.lm15 import response_to_events

        yield from response_to_events(self.complete(request))

    def close(self) -> None:
        """Release this engine's hold on the shared model (unloaded when no engine uses it)."""
        self._finalizer()

    @property
    def identity_dtype(self) -> str | None:
        """The dtype a judgment records in its decoding settings (its identity): None for float32, what every
        local judgment was computed in before the default became machine-dependent, so those keep their keys;
        bfloat16 and float16 judgments are told apart from them."""
        return None if self.dtype == "float32" else self.dtype

    def dump_state(self) -> dict[str, Any]:
        """JSON-serialisable settings from which :meth:`load_state` rebuilds the engine (no weights)."""
        return {
            "model": self.model,
            "dtype": self._settings["dtype"],
            "device_map": self._settings["device_map"],
            "max_batch_size": self.max_batch_size,
            "max_wait_ms": self.max_wait_ms,
            "merge_adapter": self.merge_adapter,
            "grammar": self.grammar,
            "max_string_chars": self.max_string_chars,
            "force_close": self.force_close,
            "prefix_cache_mb": self.prefix_cache_mb,
        }

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LocalEngine:
        """Rebuild an engine from :meth:`dump_state` output (loads the model from local files)."""
        return cls(**state)

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalEngine:
        return self  # a handle on a loaded model; copies of a program share it

    def __copy__(self) -> LocalEngine:
        return self

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (type(self).load_state, (self.dump_state(),))

    # -- internals -----------------------------------------------------------------------------------

    @property
    def batch_sizes(self) -> list[int]:
        """Sizes of the batches this engine's model has run (shared with engines on the same base)."""
        return self._runtime.batcher.batch_sizes

    @property
    def grammar_backend(self) -> str | None:
        """Name of the grammar backend in use, or None when decoding is unconstrained."""
        backend = self._runtime.grammar(self.grammar)
        return backend.name if backend is not None else None

    def submit(self, request: Any) -> Future:
        """Prepare a request on the caller's thread and queue it; the future resolves to a ``Response``."""
        from dspy.lm15 import ContextLengthError, InvalidRequestError, UnsupportedFeatureError

        from scijudge.lm.dspy_compat import validate_engine_request

        validate_engine_request(request)
        if self._finalizer.alive is False:
            raise RuntimeError("this local engine has been closed")
        config = request.config
        if request.tools:
            raise UnsupportedFeatureError("the local engine does not run tools", feature="tools", provider="hf")
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(config, name) is not None:
                raise UnsupportedFeatureError(
                    f"the local engine has no {name}", feature=f"config.{name}", provider="hf"
                )
        if config.probabilities == "required":
            raise UnsupportedFeatureError(
                "the local engine does not compute judgment probabilities; request logprobs instead",
                feature="config.probabilities", provider="hf",
            )
        runtime = self._runtime
        messages = _chat_messages(request)
        input_ids = runtime.encode_chat(messages)
        window = runtime.context
        if window is not None and len(input_ids) >= window:
            raise ContextLengthError(
                f"prompt is {len(input_ids)} tokens but {self.model} has a context window of {window} tokens",
                provider="hf", status=400,
            )
        wanted = config.max_tokens or DEFAULT_MAX_TOKENS
        max_new = min(wanted, window - len(input_ids)) if window is not None else wanted
        backend = None
        reserve = 0
        try:
            spec = GrammarSpec.from_response_format(config.response_format, max_string_chars=self.max_string_chars)
            if spec is not None:
                backend = runtime.grammar(self.grammar)
                if backend is not None:
                    backend.compiled(spec)  # compile errors surface on the caller's request, not in the batch
                    reserve = backend.closer.reserve(spec, backend) if self.force_close else 0
        except GrammarError as exc:
            raise InvalidRequestError(f"unsupported response_format: {exc}", provider="hf", status=400) from exc
        row = Row(
            input_ids=input_ids,
            max_new_tokens=max(1, int(max_new)),
            temperature=float(config.temperature or 0.0),
            top_p=config.top_p,
            top_k=config.top_k,
            seed=config.seed,
            stop=tuple(config.stop),
            grammar=spec,
            backend=backend,
            logprobs=config.logprobs,
            reserve=reserve,
        )
        inner = runtime.batcher.submit(
            row,
            group=self._adapter,
            prefix_key=_prefix_key(messages, input_ids),
            max_batch_size=self.max_batch_size,
            max_wait_s=self.max_wait_ms / 1000.0,
        )
        outer: Future = Future()

        def _finish(done: Future) -> None:
            exc = done.exception()
            if exc is not None:
                outer.set_exception(exc)
                return
            try:
                outer.set_result(self._response(done.result(), len(input_ids)))
            except BaseException as error:
                outer.set_exception(error)

        inner.add_done_callback(_finish)
        return outer

    # -- decision mode (scijudge.lm.decision) --------------------------------------------------------

    def score_levels(self, requests: list[Any], levels: list[str]) -> list[Any]:
        """The model's distribution over ``levels`` at the answer position of each request (prefill only, no
        text generated): a ``LevelScores`` per request, in order. Requests from several threads are batched
        together (and with each other's shared prompt prefixes) like generation requests."""
        futures = [self.submit_levels(request, levels) for request in requests]
        return [future.result() for future in futures]

    def submit_levels(self, request: Any, levels: list[str]) -> Future:
        """Queue one decision request; the future resolves to a ``LevelScores`` (see :meth:`score_levels`)."""
        from dspy.lm15 import ContextLengthError, InvalidRequestError

        from scijudge.lm.dspy_compat import validate_engine_request
        from scijudge.lm.decision import DecideRow

        validate_engine_request(request)
        if self._finalizer.alive is False:
            raise RuntimeError("this local engine has been closed")
        runtime = self._runtime
        messages = _chat_messages(request)
        text, input_ids = runtime.chat_prompt(messages)
        window = runtime.context
        if window is not None and len(input_ids) + 4 >= window:
            raise ContextLengthError(
                f"prompt is {len(input_ids)} tokens but {self.model} has a context window of {window} tokens",
                provider="hf", status=400,
            )
        try:
            plan = self._level_plan(tuple(str(v) for v in levels), text)
        except ValueError as exc:
            raise InvalidRequestError(f"decision levels {list(levels)}: {exc}", provider="hf", status=400) from exc
        return runtime.batcher.submit(
            DecideRow(input_ids, plan),
            group=(self._adapter, "decide"),
            prefix_key=_prefix_key(messages, input_ids),
            max_batch_size=self.max_decide_rows,
            max_wait_s=self.max_wait_ms / 1000.0,
        )

    def _level_plan(self, levels: tuple[str, ...], text: str) -> Any:
        """The levels' token plan after this prompt's answer position (cached per levels and prompt ending)."""
        from scijudge.lm.decision import level_paths, plan_levels

        key = (levels, text[-64:])
        plans = self.__dict__.setdefault("_plans", {})
        plan = plans.get(key)
        if plan is None:
            runtime = self._runtime
            paths = level_paths(runtime.encode_text, levels, text)
            plan = plans[key] = plan_levels(paths, runtime.stop_ids[0] if runtime.stop_ids else None)
        return plan

    def _response(self, result: RowResult, input_tokens: int) -> Any:
        from dspy.lm15 import Message, Response, TextPart, TokenLogprob, TopLogprob, Usage

        runtime = self._runtime
        logprobs = None
        if result.scores is not None:
            logprobs = tuple(
                TokenLogprob(
                    token=runtime.token_text(score.token_id),
                    logprob=score.logprob,
                    token_id=score.token_id,
                    top=tuple(TopLogprob(token=runtime.token_text(t), logprob=lp, token_id=t) for t, lp in score.top),
                )
                for score in result.scores
            )
        return Response(
            id=f"local-{uuid.uuid4().hex[:12]}",
            model=self.model,
            message=Message.assistant([TextPart(result.text)]),
            finish_reason=result.finish_reason,
            usage=Usage(input_tokens=input_tokens, output_tokens=len(result.token_ids)),
            logprobs=logprobs,
            logprobs_complete=result.scores_complete,
            provider_data={"engine": "scijudge.local", "grammar": result.grammar_backend,
                           "forced_tokens": result.forced_tokens},
        )


class AsyncLocalEngine:
    """The async face of a :class:`LocalEngine`: awaits the same batches without blocking the event loop."""

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine

    async def complete(self, request: Any) -> Any:
        return await asyncio.wrap_future(self.engine.submit(request))

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        from dspy.lm15 import response_to_events

        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Engines are borrowed by dspy.LM; closing the model is ``LocalEngine.close``."""

    def dump_state(self) -> dict[str, Any]:
        return self.engine.dump_state()

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> AsyncLocalEngine:
        return cls(LocalEngine.load_state(state))

    def __deepcopy__(self, memo: dict[int, Any]) -> AsyncLocalEngine:
        return self


def local_lm(
    model: str,
    *,
    dtype: str | None = None,
    device_map: Any = None,
    max_batch_size: int = 8,
    max_wait_ms: float = 10,
    merge_adapter: bool = True,
    grammar: str | None = None,
    max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS,
    force_close: bool = True,
    prefix_cache_mb: int | None = None,
    **lm_kwargs: Any,
) -> Any:
    """A ``dspy.LM`` backed by a local transformers (+PEFT) model; see the module docstring.

    Example: ``lm = local_lm("hf:/models/yescieval-qa-adapter", max_tokens=256, logprobs=True, top_logprobs=5)``.
    Extra keyword arguments (``temperature``, ``max_tokens``, ``cache``, ``logprobs``, ``top_logprobs`` ...)
    go to ``dspy.LM``.
    """
    import dspy

    from scijudge.lm.dspy_compat import use_local_cost_map

    use_local_cost_map()
    engine = LocalEngine(
        model, dtype=dtype, device_map=device_map, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms,
        merge_adapter=merge_adapter, grammar=grammar, max_string_chars=max_string_chars, force_close=force_close,
        prefix_cache_mb=prefix_cache_mb,
    )
    from scijudge.lm.smollm2 import identity_name

    # hf:smollm2 is stored as hf:smollm2@<weights hash>: a judgment names the weights that made it
    return dspy.LM(identity_name(model), engine=engine, async_engine=AsyncLocalEngine(engine), **lm_kwargs)
