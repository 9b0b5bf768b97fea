"""The chain's decision request: a rating-only prompt, a few output tokens, the distribution read from logprobs.

A decision judgment asks for the level only (no JSON, no rationale), greedy, ``max_tokens`` small, with
``logprobs`` / ``top_logprobs`` (lm15's ``Config.logprobs``; OpenAI, vLLM, SGLang and any OpenAI-compatible
server send them), and reads the probability of every level at the answer token. The request goes through the
chain's own transport (retries, rate-limit pauses, fault classes, attempts), so run-level faults stop the run
and item-level refusals abstain exactly as for generated judgments. A provider that returns no logprobs is a
run-level ``EndpointError`` naming the model: never a silent fallback to generation.

What an API shows is the top-k alternatives at each *generated* position. Single-token levels (1..5 on every
tokenizer) are read exactly up to top-k truncation (``coverage`` says how much of the mass the levels had).
Word labels count for the one label a token starts (``sat``, ``not``); a token that starts several levels
(``1`` when ``10`` is a level) is split by chaining along the generated path when the model wrote it, and is
otherwise an abstention that says why (never a guess).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from scijudge.chain.cache import cache_key, cached_response, store_response
from scijudge.chain.chain import Abstained, CallRecord, StructuredChain, _drop_empty_optional, to_lm15
from scijudge.errors import EndpointError
from scijudge.records import Attempt, reply_text

DECISION_STRATEGY = "decision"
"""The ``strategy`` recorded on a decision request's attempts."""
TOP_LOGPROBS = 20  # OpenAI's maximum; vLLM and SGLang allow more
MAX_TOKENS = 3

PROB_DIGITS = 12
"""Probabilities are rounded to 12 decimals: equal distributions reached through different token splits or orders
(0.2 + 0.1 against 0.3) compare equal, so a cascade tests them as one tie group instead of by their last bit."""
_SKIP = re.compile(r"^[\s\"'`*:\[\(]*$")  # tokens with no content before the answer ("", " ", '"', "**")
_LEAD = re.compile(r"^[\s\"'`*\[\(]+")  # decoration a content token may carry before the answer


def rating_only_instruction(levels: Sequence[str], what: str = "rating") -> str:
    """The closing line of a decision prompt (the judge's prompt goes before it, unchanged)."""
    return (f"Answer with the {what} only: one of {', '.join(levels)}. Do not write anything else (no rationale, "
            "no JSON, no punctuation).")


def decision_messages(chain: StructuredChain, signature: Any, demos: list[dict[str, Any]], inputs: dict[str, Any],
                      instruction: str) -> tuple[str | None, tuple[Any, ...]]:
    """The judge's prompt in the chain's layout (rubric-first or item-first) with ``instruction`` closing the
    last user message: lm15 (system, messages)."""
    signature, inputs = _drop_empty_optional(signature, inputs)
    messages = chain.format(signature, demos, inputs)
    for message in reversed(messages):
        if message["role"] == "user":
            message["content"] = f"{message['content']}\n\n{instruction}"
            break
    return to_lm15(messages)


def decision_request(model: str, system: str | None, chat: tuple[Any, ...],
                     levels: Sequence[str] | None = None) -> Any:
    """The lm15 request of one decision: greedy, ``MAX_TOKENS`` output tokens, top-``TOP_LOGPROBS`` logprobs;
    ``levels`` ride along in ``config.extensions`` for an engine that asks a decision endpoint about them
    (``scijudge.lm.decisions``; never sent to chat providers)."""
    from dspy import lm15

    extensions = {"scijudge_levels": [str(x) for x in levels]} if levels else None
    config = lm15.Config(temperature=0.0, max_tokens=MAX_TOKENS, logprobs=TOP_LOGPROBS,
                         **({"extensions": extensions} if extensions else {}))
    return lm15.Request(model=model, messages=chat, system=system, config=config)


def decide_via_api(chain: StructuredChain, lm: Any, request: Any, levels: Sequence[str],
                   record: CallRecord) -> tuple[dict[str, float], float]:
    """Send one decision request through the chain's transport and read (distribution, coverage).

    Raises ``EndpointError`` when the provider returns no logprobs, ``Abstained`` when this judgment cannot be
    read (context length, a refused prompt, levels not among the alternatives).
    """
    use_cache = bool(getattr(lm, "cache", False))
    key = cache_key(lm, request) if use_cache else None
    response = cached_response(key) if key is not None else None
    if response is not None:
        record.attempts.append(Attempt(strategy=DECISION_STRATEGY, temperature=0.0, max_tokens=MAX_TOKENS,
                                       outcome="ok", cached=True, reply=reply_text(response.text)))
    else:
        from scijudge.lm.dspy_compat import short_answer_request

        with short_answer_request():  # a few tokens on purpose: DSPy's truncation warning does not apply
            response = chain._send(lm, request, DECISION_STRATEGY, 0.0, MAX_TOKENS, record, last_strategy=True)
    attempt = record.attempts[-1]
    dropped = [a for a in (getattr(response, "adaptations", None) or ()) if "logprobs" in str(a)]
    if not response.logprobs or dropped:
        attempt.outcome, attempt.error = "provider_error", "the response carries no token logprobs"
        raise EndpointError(f"model {lm.model!r} returned no token logprobs; decision mode needs a provider that "
                            "returns logprobs/top_logprobs (OpenAI chat, vLLM, SGLang, an OpenAI-compatible server) "
                            "and does not fall back to generation (drop --mode decision to generate)")
    try:
        dist, coverage = level_distribution(response.logprobs, levels)
    except ValueError as exc:
        attempt.outcome, attempt.error = "parse_error", str(exc)[:500]
        raise Abstained(f"decision: {exc}", record.attempts) from exc
    record.text = response.text
    if key is not None and not attempt.cached:
        store_response(key, response)  # only responses whose distribution was read
    return dist, coverage


def _positions(logprobs: Any) -> list[tuple[str, dict[str, float]]]:
    """[(chosen token, {alternative: logprob, chosen included})] from lm15 TokenLogprobs or OpenAI's dicts."""
    if isinstance(logprobs, Mapping) and "content" in logprobs:
        logprobs = logprobs["content"]
    out = []
    for entry in logprobs or ():
        if isinstance(entry, Mapping):
            token, logprob = entry["token"], entry["logprob"]
            alternatives = {t["token"]: float(t["logprob"]) for t in entry.get("top_logprobs") or []}
        else:
            token, logprob = entry.token, entry.logprob
            alternatives = {t.token: float(t.logprob) for t in (entry.top or ())}
        alternatives.setdefault(token, float(logprob))
        out.append((token, alternatives))
    return out


def _norm(token: str) -> str:
    return _LEAD.sub("", token).strip().lower()


def level_distribution(logprobs: Any, levels: Sequence[str]) -> tuple[dict[str, float], float]:
    """(distribution over ``levels`` renormalised, raw mass the levels had) at the answer token.

    Numeric levels match a token exactly (after stripping decoration such as a space or a quote); word labels
    match a token that is a non-empty prefix of exactly one label. ValueError when the answer cannot be read.
    """
    positions = _positions(logprobs)
    i = 0
    while i < len(positions) and _SKIP.match(positions[i][0]):
        i += 1
    if i == len(positions):
        raise ValueError(f"no answer token among the {len(positions)} generated tokens")
    names = [str(x) for x in levels]
    lower = [x.lower() for x in names]
    numeric = all(re.fullmatch(r"-?\d+", x) for x in names)
    terms: dict[str, list[float]] = {x: [] for x in names}  # summed with math.fsum: the order tokens come in
    pending: dict[str, float] = {}                           # never changes a probability's last bit
    for token, logprob in positions[i][1].items():
        text = _norm(token)
        if not text or not math.isfinite(logprob):
            continue
        if numeric:
            exact = [x for x in names if x == text]
            longer = [x for x in names if x != text and x.startswith(text)]
            if exact and not longer:
                terms[exact[0]].append(math.exp(logprob))
            elif longer:  # "1" when "10" is a level and the tokenizer splits digits
                pending[text] = pending.get(text, 0.0) + math.exp(logprob)
        else:
            hits = [x for x, xl in zip(names, lower, strict=True) if xl.startswith(text) or text.startswith(xl)]
            if len(hits) == 1:
                terms[hits[0]].append(math.exp(logprob))
            elif len(hits) > 1:
                pending[text] = pending.get(text, 0.0) + math.exp(logprob)
    for text, p in pending.items():  # chain along the generated path where the model wrote this token
        if not numeric or _norm(positions[i][0]) != text or i + 1 >= len(positions):
            raise ValueError(f"token {text!r} starts several levels and their split is not visible from "
                             "top_logprobs (use single-token levels, or a server that scores token ids)")
        following = dict.fromkeys([x for x in names if x.startswith(text)], 0.0)
        for token, logprob in positions[i + 1][1].items():
            rest = token.strip()
            if rest and text + rest in following:
                following[text + rest] += math.exp(logprob)
            elif text in following and not re.match(r"\s*\d", token):  # a non-digit ends the number
                following[text] += math.exp(logprob)
        z = sum(following.values())
        if z <= 0:
            raise ValueError(f"no continuation of {text!r} among the top alternatives")
        for level, c in following.items():
            terms[level].append(p * c / z)
    mass = {x: math.fsum(t) for x, t in terms.items()}
    total = math.fsum(mass.values())
    if total <= 0:
        raise ValueError(f"none of the levels {names} is among the top alternatives at the answer token "
                         f"(it wrote {positions[i][0]!r})")
    return {x: round(m / total, PROB_DIGITS) for x, m in mass.items()}, total


__all__ = ["DECISION_STRATEGY", "decide_via_api", "decision_messages", "decision_request", "level_distribution",
           "rating_only_instruction"]
