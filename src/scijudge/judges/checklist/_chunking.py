"""Token counting and token-aware splitting of long reports into overlapping chunks."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_CHUNK_TOKENS = 96_000
DEFAULT_OVERLAP_TOKENS = 1_000
MIN_CHUNK_TOKENS = 64
_BYTE_SLACK = 8  # room for a tokenizer's word-boundary marker on top of one token per byte


TokenCounter = Callable[[str], int]


def default_overlap(chunk_tokens: int) -> int:
    """Overlap used when none is given: 1,000 tokens, but never more than an eighth of the chunk budget."""
    return min(DEFAULT_OVERLAP_TOKENS, max(0, chunk_tokens // 8))




def _tokenizer_counter(tokenizer: Any) -> TokenCounter:
    """Counter from a tokenizer object (HF ``encode(text, add_special_tokens=False)``, tiktoken
    ``encode_ordinary``) or a plain ``str -> int`` function."""
    if hasattr(tokenizer, "encode_ordinary"):
        return lambda text: len(tokenizer.encode_ordinary(text))
    if hasattr(tokenizer, "encode"):
        def count(text: str) -> int:
            try:
                return len(tokenizer.encode(text, add_special_tokens=False))
            except TypeError:
                return len(tokenizer.encode(text))
        return count
    if callable(tokenizer):
        return lambda text: int(tokenizer(text))
    raise TypeError("tokenizer must have encode()/encode_ordinary() or be a function text -> token count")


def _local_tokenizer(lm: Any) -> Any:
    """The tokenizer of an in-process model, when its LM or engine exposes one."""
    for owner in (getattr(lm, "engine", None), lm):
        tokenizer = getattr(owner, "tokenizer", None)
        if tokenizer is not None and (hasattr(tokenizer, "encode") or hasattr(tokenizer, "encode_ordinary")):
            return tokenizer
    return None


def chars_per_token_estimate(text: str) -> int:
    """Fallback estimate: one token per four characters, rounded up (documented, used only as a last resort)."""
    return math.ceil(len(text) / 4)


@functools.lru_cache(maxsize=64)
def _litellm_counter(model: str) -> TokenCounter | None:
    try:
        import litellm

        litellm.token_counter(model=model, text="probe")
    except Exception:
        return None
    return lambda text: int(litellm.token_counter(model=model, text=text))


def token_counter_for(lm: Any, tokenizer: Any = None) -> tuple[TokenCounter, str]:
    """The best available token counter for a model, and its name: ``tokenizer``, ``litellm`` or ``chars/4``."""
    if tokenizer is None:
        tokenizer = _local_tokenizer(lm)
    if tokenizer is not None:
        return _tokenizer_counter(tokenizer), "tokenizer"
    model = getattr(lm, "model", None)
    if isinstance(model, str) and model:
        counter = _litellm_counter(model)
        if counter is not None:
            return counter, "litellm"
    return chars_per_token_estimate, "chars/4"


@dataclass(frozen=True)
class Chunk:
    """A part of a report: ``text[start:end]``, with its token count."""

    start: int
    end: int
    tokens: int


_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ". ", " ")


def _pieces(text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    """Contiguous spans of ``text[start:end]`` split after each separator (separators stay attached)."""
    spans: list[tuple[int, int]] = []
    cursor = start
    while cursor < end:
        found = text.find(separator, cursor, end)
        if found < 0:
            spans.append((cursor, end))
            break
        stop = found + len(separator)
        spans.append((cursor, stop))
        cursor = stop
    return spans


def _units(text: str, start: int, end: int, budget: int, count: TokenCounter, level: int,
           tokens: int | None = None) -> list[tuple[int, int, int]]:
    """Split ``text[start:end]`` into contiguous (start, end, tokens) units of at most ``budget`` tokens,
    preferring paragraph, then line, then sentence, then word boundaries; hard character cuts last."""
    if tokens is None:
        tokens = count(text[start:end])
    if tokens <= budget:
        return [(start, end, tokens)]
    if level >= len(_SEPARATORS):
        return _hard_split(text, start, end, budget, count, tokens)
    spans = _pieces(text, start, end, _SEPARATORS[level])
    if len(spans) == 1:
        return _units(text, start, end, budget, count, level + 1, tokens)
    out: list[tuple[int, int, int]] = []
    for a, b in spans:
        out.extend(_units(text, a, b, budget, count, level + 1))
    return out


def _hard_split(text: str, start: int, end: int, budget: int, count: TokenCounter,
                tokens: int) -> list[tuple[int, int, int]]:
    """Cut a span with no usable boundary into pieces of at most ``budget`` tokens (character cuts)."""
    out: list[tuple[int, int, int]] = []
    cursor = start
    chars_per_token = max(1.0, (end - start) / max(1, tokens))
    while cursor < end:
        size = max(1, int(budget * chars_per_token * 0.9))
        stop = min(end, cursor + size)
        piece_tokens = count(text[cursor:stop])
        while piece_tokens > budget and stop - cursor > 1:
            stop = cursor + max(1, (stop - cursor) * 3 // 4)
            piece_tokens = count(text[cursor:stop])
        out.append((cursor, stop, piece_tokens))
        cursor = stop
    return out


def _fit(text: str, units: list[tuple[int, int, int]], first: int, last: int, budget: int,
         count: TokenCounter) -> tuple[int, int]:
    """Count the packed chunk as one text (pieces counted apart undercount it slightly: tokens merge across
    joins) and drop units from its end until it fits; returns the new end index and the chunk's count."""
    while True:
        tokens = count(text[units[first][0]:units[last - 1][1]])
        if tokens <= budget or last - first == 1:
            return last, tokens
        excess, dropped = tokens - budget, 0
        while last - first > 1 and dropped < excess * 1.1 + 1:
            last -= 1
            dropped += units[last][2]


def split_report(text: str, budget: int, overlap: int, count: TokenCounter,
                 total_tokens: int | None = None) -> list[Chunk]:
    """Overlapping chunks of at most ``budget`` tokens (each counted as a whole) covering ``text``;
    consecutive chunks share up to ``overlap`` tokens of whole units (paragraphs, lines, sentences or words)."""
    if budget < 1 or overlap < 0 or overlap >= budget:
        raise ValueError(f"need budget >= 1 and 0 <= overlap < budget, got budget={budget}, overlap={overlap}")
    units = _units(text, 0, len(text), budget, count, 0, total_tokens)
    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        last, tokens = first, 0
        while last < len(units) and (last == first or tokens + units[last][2] <= budget):
            tokens += units[last][2]
            last += 1
        last, tokens = _fit(text, units, first, last, budget, count)
        chunks.append(Chunk(units[first][0], units[last - 1][1], tokens))
        if last >= len(units):
            break
        back, carried = last, 0
        while back - 1 > first and carried + units[back - 1][2] <= overlap:
            back -= 1
            carried += units[back][2]
        first = back
    return chunks


# --- quote checking ----------------------------------------------------------------------------------
