"""Checking evidence quotes against the report, tolerant of layout but not of invented text."""

from __future__ import annotations

import functools
import re

_TYPOGRAPHY = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                             "\u2014": "-", "\u00a0": " "})
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|\u2026|\[\.\.\.\])\s*")
_SPACE = re.compile(r"\s+")


def normalise_for_quotes(text: str) -> str:
    """Whitespace collapsed, case folded, typographic quotes and dashes made plain."""
    return _SPACE.sub(" ", text.translate(_TYPOGRAPHY)).strip().casefold()


@functools.lru_cache(maxsize=16)
def _normalised_report(text: str) -> str:
    return normalise_for_quotes(text)


def quote_found(quote: str, normalised_source: str) -> bool:
    """Whether a quote appears in the (normalised) source; ``...`` separates fragments found in order."""
    fragments = [f.strip(" \"'") for f in _ELLIPSIS.split(normalise_for_quotes(quote))]
    fragments = [f for f in fragments if f]
    if not fragments:
        return False
    cursor = 0
    for fragment in fragments:
        found = normalised_source.find(fragment, cursor)
        if found < 0:
            return False
        cursor = found + len(fragment)
    return True


def unmatched_quotes(quotes: list[str], source: str) -> list[str]:
    """The quotes that do not appear in ``source`` (see ``quote_found``)."""
    normalised = _normalised_report(source)
    return [q for q in quotes if not quote_found(q, normalised)]


# --- the judge ---------------------------------------------------------------------------------------
