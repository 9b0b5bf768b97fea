"""Rating probabilities from token logprobs of a JSON answer, for local and API models alike.

A Likert judge answers ``{"rationale": "...", "rating": 4}``. The logprobs of the token that carries the
rating, with its top alternatives, give a distribution over the ratings the model considered; renormalised
over the allowed ratings it is a calibrated-looking score beside the argmax (its expectation is often a better
point estimate). Input is OpenAI's shape, which DSPy passes through: a list of
``{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}`` (``prediction.logprobs["content"]``); the
wrapper dict ``{"content": [...]}`` and ``dspy.lm15`` ``TokenLogprob`` objects (``Response.logprobs``) are read too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

_LEADING_INT = re.compile(r"\s*(-?\d+)(?!\d)")


def _entries(content: Any) -> list[tuple[str, float, list[tuple[str, float]]]]:
    """Normalise logprobs content to [(token, logprob, [(alt token, alt logprob)])]."""
    if isinstance(content, Mapping) and "content" in content:
        content = content["content"]
    if content is None:
        return []
    entries = []
    for item in content:
        if isinstance(item, Mapping):
            token, logprob = item.get("token"), item.get("logprob")
            tops = item.get("top_logprobs") or []
        else:  # dspy.lm15 TokenLogprob
            token, logprob = getattr(item, "token", None), getattr(item, "logprob", None)
            tops = getattr(item, "top", None) or []
        if not isinstance(token, str) or logprob is None:
            return []
        alternatives = []
        for top in tops:
            alt_token = top.get("token") if isinstance(top, Mapping) else getattr(top, "token", None)
            alt_logprob = top.get("logprob") if isinstance(top, Mapping) else getattr(top, "logprob", None)
            if isinstance(alt_token, str) and alt_logprob is not None:
                alternatives.append((alt_token, float(alt_logprob)))
        entries.append((token, float(logprob), alternatives))
    return entries


def _value_of(token: str, prefix: str) -> int | None:
    """The integer a token would put at the value position, given the part of it that precedes the value."""
    rest = token[len(prefix) :] if prefix and token.startswith(prefix) else token
    match = _LEADING_INT.match(rest)
    return int(match.group(1)) if match else None


def rating_distribution(
    logprobs_content: Any, *, field: str = "rating", values: Iterable[int] = (1, 2, 3, 4, 5)
) -> dict[int, float] | None:
    """Probability of each allowed rating at the token that carries ``"<field>":``'s value; None if unknown.

    The token whose text starts the value is located in the concatenated tokens; its chosen token and its
    top alternatives are read as candidate values (text before the value inside the same token, such as a
    space, is allowed for), probabilities of candidates naming the same value are added, and the result is
    renormalised over ``values``. None when the field is not found, the written value spans several tokens
    (so the alternatives of its first token are not whole values), no alternative is an allowed value, or no
    logprobs were returned.
    """
    allowed = list(dict.fromkeys(int(v) for v in values))
    entries = _entries(logprobs_content)
    if not entries or not allowed:
        return None
    text = "".join(token for token, _, _ in entries)
    match = re.search(r'(?<!\\)"' + re.escape(field) + r'"\s*:\s*"?', text)
    if match is None:
        return None
    start = match.end()
    written = _LEADING_INT.match(text, start)
    offset = 0
    for token, logprob, alternatives in entries:
        if offset <= start < offset + len(token):
            prefix = token[: start - offset]
            if written is None or _value_of(token, prefix) != int(written.group(1)):
                return None  # the value runs over several tokens (e.g. 4 then 9): alternatives are not values
            candidates = dict(alternatives)
            candidates.setdefault(token, logprob)
            mass: dict[int, float] = {}
            for candidate, candidate_logprob in candidates.items():
                value = _value_of(candidate, prefix)
                if value in allowed and math.isfinite(candidate_logprob):
                    mass[value] = mass.get(value, 0.0) + math.exp(candidate_logprob)
            total = sum(mass.values())
            if total <= 0:
                return None
            return {value: mass.get(value, 0.0) / total for value in allowed}
        offset += len(token)
    return None


def expected_rating(dist: Mapping[int, float] | None) -> float | None:
    """The mean rating under a distribution from :func:`rating_distribution` (None passes through)."""
    if not dist:
        return None
    total = sum(dist.values())
    if total <= 0:
        return None
    return sum(value * p for value, p in dist.items()) / total


def as_probs(dist: Mapping[int, float] | None) -> dict[str, float] | None:
    """The run store's ``probs`` shape: string keys ``{"1": p, ...}``."""
    return None if dist is None else {str(value): float(p) for value, p in dist.items()}


__all__ = ["rating_distribution", "expected_rating", "as_probs"]
