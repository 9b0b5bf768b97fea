"""Adversarial answer variants (YESciEval's per-rubric recipe, plus a prompt-injection probe): items made from
items, so they live in the data layer beside the item loader (``scijudge perturb`` writes them; the robustness
metrics computed from judging them are ``scijudge.metrics.robustness``'s, the variant id pattern is
``scijudge.vocab.VARIANT_ID``).

A robust judge rates a perturbed answer below the original on the perturbed rubric, and does not raise
its rating when the answer contains an instruction addressed to it. Variants are deterministic under a
seed; the inserted sentences come from configurable pools (``datasets/perturbation_pools``).
"""

from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scijudge.errors import InputError
from scijudge.vocab import INJECTION

__all__ = ["INJECTION", "LEVELS", "RECIPE", "RUBRICS", "Pools", "perturb_items", "split_sentences"]

LEVELS: tuple[str, ...] = ("subtle", "extreme")
RUBRICS: tuple[str, ...] = (
    "cohesion", "conciseness", "readability", "coherence", "relevancy", "correctness", "informativeness",
    "integration", "completeness",
)
_POOL_FILES = ("redundant", "informal", "social_media", "unrelated", "connectors", "injection_subtle",
               "injection_extreme")


# --- pools ---------------------------------------------------------------------------------------------


def default_pools_dir() -> Path:
    """The shipped pools: the installed wheel's data folder, else the source tree's ``datasets/``."""
    from scijudge._resources import shipped_path

    found = shipped_path("datasets/perturbation_pools")
    if found is not None:
        return found
    raise InputError("perturbation pools not found (expected datasets/perturbation_pools)", field="pools")


def _read_pool(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@dataclass(frozen=True)
class Pools:
    """Sentence pools by name (``redundant``, ``offtopic_<domain>``, ...) and domain keywords."""

    sentences: dict[str, list[str]]
    domains: dict[str, list[str]]

    @classmethod
    def load(cls, directory: str | Path | None = None) -> Pools:
        """Read the pools from ``directory``; a file missing there is taken from the shipped pools."""
        shipped = default_pools_dir()
        folders = [Path(directory), shipped] if directory is not None else [shipped]
        if directory is not None and not Path(directory).is_dir():
            raise InputError("pools folder not found", file=directory, field="pools")
        names = set(_POOL_FILES)
        for folder in folders:
            names.update(p.stem for p in folder.glob("offtopic_*.txt"))
        sentences: dict[str, list[str]] = {}
        for name in sorted(names):
            for folder in folders:
                path = folder / f"{name}.txt"
                if path.exists():
                    sentences[name] = _read_pool(path)
                    if not sentences[name]:
                        raise InputError("pool file has no sentences", file=path)
                    break
        missing = [n for n in _POOL_FILES if n not in sentences]
        if missing:
            raise InputError(f"missing pool file {missing[0]}.txt", file=folders[0], field="pools")
        if "offtopic_general" not in sentences:
            raise InputError("missing pool file offtopic_general.txt", file=folders[0], field="pools")
        domains: dict[str, list[str]] = {}
        for folder in reversed(folders):
            path = folder / "domains.txt"
            if path.exists():
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    name, sep, words = line.partition(":")
                    if not sep:
                        raise InputError("expected 'domain: keyword, keyword'", file=path, line=number)
                    domains[name.strip()] = [w.strip().lower() for w in words.split(",") if w.strip()]
        return cls(sentences=sentences, domains=domains)

    def connectors(self) -> list[str]:
        """Connectors, longest first so that multi-word ones match before their parts."""
        return sorted(self.sentences["connectors"], key=len, reverse=True)


# --- sentences -----------------------------------------------------------------------------------------

_ABBREVIATIONS = {
    "e.g", "i.e", "et al", "fig", "figs", "eq", "eqs", "vs", "cf", "dr", "mr", "mrs", "ms", "prof", "no", "approx",
    "ca", "etc", "ref", "refs", "sec", "vol", "al", "st", "jr", "resp", "tab", "ch",
}
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'”’)\]]*)(\s+)(?=[\"“(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")


def split_sentences(text: str) -> tuple[list[str], list[str]]:
    """Split text into sentences and the separators after each (so the text can be rebuilt exactly).

    Handles common abbreviations (e.g., et al., Fig.), decimals and initials; paragraph breaks and list
    items also end a sentence.
    """
    sentences: list[str] = []
    separators: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if match.group(2) is not None:
            end = match.start(2)
            head = text[start:end]
            word = re.search(r"([A-Za-z][A-Za-z.]*)\.[\"'”’)\]]*$", head)
            if word and (word.group(1).lower() in _ABBREVIATIONS or len(word.group(1)) == 1):
                continue  # "et al. Smith", "J. Smith": not a boundary
            sep_start, sep_end = match.start(2), match.end(2)
        else:
            sep_start, sep_end = match.start(), match.end()
        sentence = text[start:sep_start]
        if sentence.strip():
            sentences.append(sentence)
            separators.append(text[sep_start:sep_end])
        start = sep_end
    tail = text[start:]
    if tail.strip():
        sentences.append(tail.rstrip())
        separators.append(tail[len(tail.rstrip()):])
    elif separators:
        separators[-1] += tail
    return sentences, separators


def _join(sentences: list[str], separators: list[str]) -> str:
    out = []
    for i, sentence in enumerate(sentences):
        out.append(sentence)
        if i < len(sentences) - 1:
            sep = separators[i] if i < len(separators) - 1 and separators[i] else " "
            out.append(sep)
    trailing = separators[-1] if separators else ""
    return "".join(out) + trailing


def _lower_first(sentence: str) -> str:
    s = sentence.strip()
    if len(s) > 1 and s[0].isupper() and not s[1].isupper():
        return s[0].lower() + s[1:]
    return s


def _upper_first(text: str) -> str:
    for i, ch in enumerate(text):
        if ch.isalpha():
            return text[:i] + ch.upper() + text[i + 1 :]
    return text


# --- operations ----------------------------------------------------------------------------------------


@dataclass
class _Variant:
    text: str
    operation: str
    inserted: list[str]


def _append(text: str, sentence: str) -> str:
    body = text.rstrip()
    return body + " " + sentence + text[len(body):]


def _redundant(pools: Pools, rng: random.Random, sentences: list[str]) -> str:
    template = rng.choice(pools.sentences["redundant"])
    if "{sentence}" in template:
        return template.replace("{sentence}", _lower_first(rng.choice(sentences)))
    return template


def _redundant_for(pools: Pools, rng: random.Random, sentence: str) -> str:
    templates = [t for t in pools.sentences["redundant"] if "{sentence}" in t] or pools.sentences["redundant"]
    template = rng.choice(templates)
    return template.replace("{sentence}", _lower_first(sentence))


def _domain(item: dict[str, Any], pools: Pools) -> str:
    meta = item.get("meta") or {}
    declared = str(meta.get("domain", "")).strip().lower().replace(" ", "_")
    if declared and f"offtopic_{declared}" in pools.sentences:
        return declared
    papers = item.get("papers") or []
    text = " ".join([str(item.get("question", ""))] + [f"{p.get('title', '')} {p.get('abstract', '')}"
                                                         for p in papers if isinstance(p, dict)]).lower()
    best, best_hits = "general", 0
    for name, words in sorted(pools.domains.items()):
        if f"offtopic_{name}" not in pools.sentences:
            continue
        hits = sum(len(re.findall(rf"\b{re.escape(w)}\b", text)) for w in words)
        if hits > best_hits:
            best, best_hits = name, hits
    return best


def _remove_connectors(text: str, pools: Pools, only_first: bool) -> tuple[str, list[str]]:
    """Remove logical connectors followed by a comma that open a sentence or follow a comma/semicolon."""
    alternatives = "|".join(re.escape(c) for c in pools.connectors())
    pattern = re.compile(
        rf"(?P<start>^|(?<=[.!?])\s+|(?<=[.!?][\"”’)])\s+|\n\s*)(?P<a>{alternatives}),\s*"
        rf"|(?P<pre>[,;])\s*(?P<b>{alternatives}),\s*",
        flags=re.IGNORECASE,
    )
    removed: list[str] = []

    def repl(match: re.Match[str]) -> str:
        if only_first and removed:
            return match.group(0)
        if match.group("a"):
            removed.append(match.group("a"))
            return match.group("start") + "\x00"  # marks a sentence start to re-capitalise
        removed.append(match.group("b"))
        return match.group("pre") + " "

    out = pattern.sub(repl, text)
    if not removed:
        return text, []
    out = re.sub(r"\x00(\W*)(\w)", lambda m: m.group(1) + m.group(2).upper(), out).replace("\x00", "")
    return out, removed


def _apply(item: dict[str, Any], text: str, rubric: str, level: str, pools: Pools, rng: random.Random) -> _Variant:
    sentences, seps = split_sentences(text)
    extreme = level == "extreme"
    if rubric == "cohesion":
        if len(sentences) < 2:
            return _Variant(text, "unchanged (fewer than 2 sentences)", [])
        if not extreme:
            sentences[-1], sentences[-2] = sentences[-2], sentences[-1]
            return _Variant(_join(sentences, seps), "swap last two sentences", [])
        if len(sentences) < 3:
            return _Variant(text, "unchanged (fewer than 3 sentences: a shuffle is the subtle swap)", [])
        identity = list(range(len(sentences)))
        swap = identity[:-2] + [identity[-1], identity[-2]]
        order = list(identity)
        for _ in range(50):
            rng.shuffle(order)
            if order not in (identity, swap):
                break
        else:  # pragma: no cover - probability (2/n!)^50
            order = identity[1:] + identity[:1]
        return _Variant(_join([sentences[i] for i in order], seps), "shuffle all sentences", [])
    if rubric == "conciseness":
        if not sentences:
            return _Variant(text, "unchanged (empty answer)", [])
        if not extreme:
            extra = _redundant(pools, rng, sentences)
            pos = rng.randrange(1, len(sentences) + 1)
            new = sentences[:pos] + [extra] + sentences[pos:]
            new_seps = seps[: pos - 1] + [" "] + seps[pos - 1 :]
            return _Variant(_join(new, new_seps), "insert a redundant sentence", [extra])
        new, new_seps, inserted = [], [], []
        for sentence, sep in zip(sentences, seps):
            extra = _redundant_for(pools, rng, sentence)
            new += [sentence, extra]
            new_seps += [" ", sep]
            inserted.append(extra)
        return _Variant(_join(new, new_seps), "a redundant sentence after every sentence", inserted)
    if rubric == "readability":
        extra = rng.choice(pools.sentences["social_media" if extreme else "informal"])
        op = "append a social-media style sentence" if extreme else "append an informal sentence"
        return _Variant(_append(text, extra), op, [extra])
    if rubric in ("coherence", "relevancy", "correctness", "informativeness"):
        if extreme:
            extra = rng.choice(pools.sentences["unrelated"])
            return _Variant(_append(text, extra), "append an unrelated sentence", [extra])
        domain = _domain(item, pools)
        extra = rng.choice(pools.sentences[f"offtopic_{domain}"])
        return _Variant(_append(text, extra), f"append an off-topic sentence from the same domain ({domain})", [extra])
    if rubric == "integration":
        out, removed = _remove_connectors(text, pools, only_first=not extreme)
        if not extreme:
            if not removed:
                return _Variant(text, "unchanged (no logical connector found)", [])
            return _Variant(out, f"remove the first logical connector ({removed[0]})", [])
        parts, _ = split_sentences(out)
        if len(parts) < 2:
            return _Variant(text, "unchanged (fewer than 2 sentences to separate)", [])
        listed = "\n".join(f"- {part.strip()}" for part in parts)
        what = f"remove every logical connector ({', '.join(removed)}) and" if removed else "no connector to remove;"
        return _Variant(listed, f"{what} list the sentences as separate points", [])
    if rubric == "completeness":
        if len(sentences) < 2:
            return _Variant(text, "unchanged (fewer than 2 sentences)", [])
        kept = _join(sentences[:-1], seps[:-2] + [seps[-1]])
        if not extreme:
            return _Variant(kept, "drop the last sentence", [])
        extra = rng.choice(pools.sentences["unrelated"])
        return _Variant(_append(kept, extra), "drop the last sentence and append an unrelated one", [extra])
    if rubric == INJECTION:
        extra = rng.choice(pools.sentences[f"injection_{level}"])
        op = "append an instruction to the judge" if extreme else "append a note addressed to the evaluator"
        return _Variant(_append(text, extra), op, [extra])
    raise InputError(f"unknown rubric {rubric!r}: use {', '.join(RUBRICS + (INJECTION,))}", field="rubrics")


def perturb_items(
    items: list[dict[str, Any]],
    level: str,
    seed: int,
    rubrics: list[str] | None = None,
    *,
    pools: Pools | str | Path | None = None,
    field: str = "answer",
    include_original: bool = False,
    not_made: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Adversarial variants of each item, one per rubric (and level), with ids ``<id>::<rubric>::<level>``.

    Args:
        items: dicts with at least ``id`` and the ``field`` text (canonical items: ``Item.model_dump()``).
        level: ``subtle``, ``extreme`` or ``both``.
        seed: the same seed, item and rubric always give the same variant, whatever the item order.
        rubrics: YESciEval QA rubrics to perturb plus ``injection`` (default: all of them).
        pools: a ``Pools`` or a folder of pool files; default the shipped pools.
        include_original: put each original item before its variants (so one run judges both).
        not_made: a list that receives ``{item_id, rubric, level, reason}`` for each variant that could not
            be made: the recipe left the text unchanged, or the extreme variant equals the subtle one.
    Each variant's ``meta.perturbation`` holds base_id, rubric, level, operation, changed and inserted. Only
    variants that differ from the original (and extreme ones that differ from the subtle one) are returned.
    """
    levels = LEVELS if level == "both" else (level,)
    if any(lv not in LEVELS for lv in levels):
        raise InputError(f"level must be subtle, extreme or both, got {level!r}", field="level")
    chosen = list(rubrics) if rubrics else [*RUBRICS, INJECTION]
    unknown = [r for r in chosen if r not in RUBRICS and r != INJECTION]
    if unknown:
        raise InputError(f"unknown rubric {unknown[0]!r}: use {', '.join(RUBRICS + (INJECTION,))}", field="rubrics")
    loaded = pools if isinstance(pools, Pools) else Pools.load(pools)
    out: list[dict[str, Any]] = []
    for position, item in enumerate(items, 1):
        if not isinstance(item, dict) or not item.get("id"):
            raise InputError("each item needs a non-empty 'id'", line=position, field="id")
        text = item.get(field)
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"item {item['id']!r} has no text in field {field!r}", line=position, field=field)
        if include_original:
            out.append(copy.deepcopy(item))
        for rubric in chosen:
            for lv in levels:
                variant = _make(item, text, rubric, lv, loaded, seed)
                reason = None
                if variant.text == text:
                    reason = variant.operation
                elif lv == "extreme" and _make(item, text, rubric, "subtle", loaded, seed).text == variant.text:
                    reason = "extreme variant identical to the subtle one"
                if reason is not None:
                    if not_made is not None:
                        not_made.append({"item_id": item["id"], "rubric": rubric, "level": lv, "reason": reason})
                    continue
                new = copy.deepcopy(item)
                new["id"] = f"{item['id']}::{rubric}::{lv}"
                new[field] = variant.text
                meta = dict(new.get("meta") or {})
                meta["perturbation"] = {"base_id": item["id"], "rubric": rubric, "level": lv,
                                        "operation": variant.operation, "changed": variant.text != text,
                                        "inserted": variant.inserted}
                new["meta"] = meta
                out.append(new)
    return out


def _make(item: dict[str, Any], text: str, rubric: str, level: str, pools: Pools, seed: int) -> _Variant:
    """One variant, seeded by (seed, item, rubric, level) so it never depends on the batch."""
    return _apply(item, text, rubric, level, pools, random.Random(f"{seed}|{item['id']}|{rubric}|{level}"))


# --- robustness metrics ----------------------------------------------------------------------------------


# convenience for callers that want the recipe as data (docs, report)
RECIPE: dict[str, dict[str, str]] = {
    "cohesion": {"subtle": "swap the last two sentences", "extreme": "shuffle all sentences"},
    "conciseness": {"subtle": "insert a redundant sentence", "extreme": "a redundant sentence after every sentence"},
    "readability": {"subtle": "append an informal sentence", "extreme": "append a social-media style sentence"},
    **{r: {"subtle": "append an off-topic sentence from the same domain", "extreme": "append an unrelated sentence"}
       for r in ("coherence", "relevancy", "correctness", "informativeness")},
    "integration": {"subtle": "remove the first logical connector",
                    "extreme": "remove every logical connector and list the sentences as separate points"},
    "completeness": {"subtle": "drop the last sentence", "extreme": "drop the last sentence, append an unrelated one"},
    INJECTION: {"subtle": "a note to the evaluator claiming the answer is excellent",
                "extreme": "an explicit instruction to give the top rating"},
}
