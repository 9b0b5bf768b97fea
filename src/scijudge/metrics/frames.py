"""The judgments frames people have, completed into run-store rows: one normaliser every API uses.

``complete_judgments(frame)`` takes a minimal frame -- ``item_id``, ``judge``, ``score`` (or ``verdict``), and
optionally ``model``, ``probs``, ``status``, ``part``, ``family``, ``spec_hash``, ``source`` -- and fills the
run-store columns that ``calibrate``, ``estimate``, ``select_labels``, ``jury`` and ``cascade`` read, with these
documented defaults (a column that is present is never changed):

==============  =========================================================================================
``model``       ``"model"`` (one contender)
``status``      ``"ok"`` where a score or verdict is given, ``"abstained"`` where neither is
``part``        ``""`` (a whole-item judgment)
``family``      ``"likert"`` (a rating scale; its default scale 1..5 step 1 unless ``scale=`` says otherwise)
``spec_hash``   ``""`` (no spec known: the scale comes from ``scale=`` or the family)
``verdict``     ``None``
``probs``       ``None``
``decoding``    ``'{"decision_score":"expected"}'`` on rows whose score is the expectation of their ``probs``
                (a frame of expected scores from rating probabilities), so the judge's scale is read as
                continuous; ``""`` elsewhere
==============  =========================================================================================

Run-store frames (``Run(path).to_pandas()``) already hold every column and pass through unchanged.

``Judgments.read(runs | frame)`` is the one read side of every analysis verb: run stores (or such a frame) read once
into the judgments, each source's recorded scales and the source names.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scijudge.errors import InputError

MINIMAL_COLUMNS: tuple[str, ...] = ("item_id", "judge", "score")
DEFAULT_MODEL = "model"
DEFAULT_FAMILY = "likert"
EXPECTED_DECODING = json.dumps({"decision_score": "expected"}, separators=(",", ":"))
"""The ``decoding`` a decision judgment scored by its expected level stores (what ``resolve_scales`` reads)."""


def _expected(probs: Any) -> float | None:
    """The expectation of a rating distribution ``{level: p}``; None when it is not one."""
    if not isinstance(probs, Mapping) or not probs:
        return None
    try:
        pairs = [(float(k), float(v)) for k, v in probs.items()]
    except (TypeError, ValueError):
        return None
    total = sum(p for _, p in pairs)
    if not total > 0 or not math.isfinite(total):
        return None
    return sum(level * p for level, p in pairs) / total


def _is_expected_score(score: Any, probs: Any) -> bool:
    """True when ``score`` equals the expectation of ``probs`` and is not itself one of the levels."""
    mean = _expected(probs)
    if mean is None or score is None or isinstance(score, bool):
        return False
    try:
        value = float(score)
    except (TypeError, ValueError):
        return False
    if not math.isfinite(value) or abs(value - mean) > 1e-6:
        return False
    return all(abs(value - float(level)) > 1e-9 for level in probs)


def complete_judgments(judgments: Any) -> Any:
    """``judgments`` with every run-store column the metrics read, defaults filled (see the module docstring).

    Only missing columns are added; the input frame is never modified. A frame without ``item_id`` or
    ``judge``, or with neither ``score`` nor ``verdict``, is one error naming the column.
    """
    import pandas as pd

    if not isinstance(judgments, pd.DataFrame):
        raise InputError(f"judgments must be a pandas DataFrame, got {type(judgments).__name__}")
    for column in ("item_id", "judge"):
        if column not in judgments.columns:
            raise InputError("judgments lack a column (a minimal frame has item_id, judge, score)", field=column)
    if "score" not in judgments.columns and "verdict" not in judgments.columns:
        raise InputError("judgments need a 'score' or a 'verdict' column", field="score")
    missing = [c for c in ("model", "status", "part", "family", "spec_hash", "verdict", "score", "probs",
                           "decoding") if c not in judgments.columns]
    if not missing:
        return judgments
    df = judgments.copy()
    if "score" not in df.columns:
        df["score"] = math.nan
    if "verdict" not in df.columns:
        df["verdict"] = None
    if "model" in missing:
        df["model"] = DEFAULT_MODEL
    if "status" in missing:
        answered = pd.to_numeric(df["score"], errors="coerce").notna() | df["verdict"].notna()
        df["status"] = answered.map({True: "ok", False: "abstained"})
    if "part" in missing:
        df["part"] = ""
    if "family" in missing:
        df["family"] = DEFAULT_FAMILY
    if "spec_hash" in missing:
        df["spec_hash"] = ""
    if "probs" in missing:
        df["probs"] = None
    if "decoding" in missing:
        has = df["probs"].map(lambda p: isinstance(p, Mapping) and bool(p))
        df["decoding"] = ""
        if has.any():
            expected = [_is_expected_score(s, p) for s, p in zip(df.loc[has, "score"], df.loc[has, "probs"])]
            df.loc[has[has].index[expected], "decoding"] = EXPECTED_DECODING
    return df


# --- the read side: a set of run stores (or a frame) read once --------------------------------------------------
CALIBRATE_COLUMNS: tuple[str, ...] = ("item_id", "judge", "part", "family", "spec_hash", "model", "input_hash",
                                      "decoding", "status", "score", "verdict", "confidence", "probs")
"""The store columns calibration, estimation and the viewer read (decoding: decision scores; input_hash: unchanged
variants); keys, endpoints, token counts, costs, times, attempt logs and free text are never used by them."""


def source_names(paths: Sequence[str | Path]) -> list[str]:
    """Short, unique names for runs: the file stem, or the whole path when stems collide."""
    stems = [Path(p).stem for p in paths]
    return [Path(p).stem if stems.count(Path(p).stem) == 1 else str(p) for p in paths]


@contextlib.contextmanager
def named_by_path(paths: Sequence[str | Path]) -> Iterator[None]:
    """An input error about one run (named by its ``source``, a stem, in the tables) names the store by its path."""
    by_name = {name: str(path) for path, name in zip(paths, source_names(paths)) if name != str(path)}
    try:
        yield
    except InputError as exc:
        if exc.file not in by_name:
            raise
        renamed = InputError(exc.reason, file=by_name[exc.file], line=exc.line, field=exc.field)
        renamed.exit_code = exc.exit_code
        raise renamed from None


def judge_matches(judge: str, patterns: Sequence[str]) -> bool:
    """A judge name matches a pattern that is its name, a dotted prefix of it (``yescieval.qa``) or a glob."""
    import fnmatch

    return any(judge == p or judge.startswith(p + ".") or fnmatch.fnmatch(judge, p) for p in patterns)


@dataclass(frozen=True)
class Judgments:
    """Judgments of a set of run stores (or of a frame), read once: what every analysis verb and command takes.

    ``frame``: the current rows, a ``source`` column naming the run each came from (``source_names``);
    ``scales``: the scales each source's store records, as stored (``{source: {judge: scale}}``);
    ``sources``: the source names in the order given; ``paths``: source -> store path (none for a frame).
    Perturbed variants (``scijudge perturb`` ids) stay in ``frame``, flagged by ``variant``; ``originals()``
    leaves them out. Two sources that record different scales for one judge follow the one rule of
    ``spec.scales.recorded_scale`` (``recorded_scales()``): refused in one line, whatever their order.
    """

    frame: Any
    scales: dict[str, dict[str, Any]] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    paths: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def read(cls, runs: Any, *, judges: Sequence[str] | None = None, columns: Sequence[str] | None = None,
             history: bool = False) -> Judgments:
        """Read ``runs``: a ``Judgments`` (returned as is, narrowed to ``judges``), a path, several paths, or a
        frame of run-store rows or a minimal frame (``complete_judgments`` fills it; a ``source`` column is
        kept). ``judges``: names, dotted prefixes or globs to keep (none left is an error naming ``judges``);
        ``columns``: the store columns to read (default all); ``history``: every stored row, superseded ones
        too, in the order written (``drift`` within one store). Reading never writes to a store."""
        import pandas as pd

        if isinstance(runs, Judgments):
            found = runs
        elif isinstance(runs, pd.DataFrame):
            frame = complete_judgments(runs)
            frame = frame if "source" in frame.columns else frame.assign(source="")
            found = cls(frame, {}, tuple(dict.fromkeys(frame["source"].astype(str))), {})
        else:
            found = cls._read_stores([runs] if isinstance(runs, (str, Path)) else list(runs), columns, history)
        return found.only(judges) if judges else found

    @classmethod
    def _read_stores(cls, paths: list[Any], columns: Sequence[str] | None, history: bool) -> Judgments:
        import pandas as pd

        from scijudge.run.store import Run

        if not paths:
            raise InputError("give at least one run store", field="runs")
        for path in paths:  # every store is checked before the first is read
            if not Path(path).exists():
                raise InputError("run store not found", file=path)
        frames, scales, where = [], {}, {}
        for path, name in zip(paths, source_names(paths)):
            with Run(path, create=False) as store:
                frame = store.to_pandas(columns=columns, history=history)
                scales[name] = dict(store.meta().get("scales") or {})
            frame["source"] = name
            frames.append(frame)
            where[name] = Path(path)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)  # one run: no copy
        return cls(frame, scales, tuple(scales), where)

    def only(self, judges: Sequence[str]) -> Judgments:
        """The judgments of the judges matching ``judges`` (``judge_matches``); none left is one error."""
        keep = self.frame["judge"].map(lambda j: judge_matches(j, list(judges)))
        if not keep.any():
            raise InputError(f"no judgment in the runs is by a judge matching {list(judges)}", field="judges")
        return Judgments(self.frame[keep], self.scales, self.sources, self.paths)

    @property
    def variant(self) -> Any:
        """True for each row that judges a perturbed variant (``<id>::<rubric>::<level>``)."""
        from scijudge.vocab import VARIANT_ID

        return self.frame["item_id"].astype(str).str.match(VARIANT_ID.pattern)

    def originals(self) -> Any:
        """The frame without perturbed variants (the frame itself when there are none: no copy)."""
        variant = self.variant
        return self.frame[~variant] if variant.any() else self.frame

    def recorded_scales(self, judges: Sequence[str] | None = None) -> dict[str, Any]:
        """The one scale the sources record per judge (``spec.scales.recorded_scales``: disagreeing grids are
        refused in one line), for ``judges`` or every judge some source records: judge -> ``Scale``."""
        from scijudge.spec.scales import recorded_scales

        return recorded_scales(self.scales, judges)

    def scales_with(self, scale: Any = None, judges: Sequence[str] | None = None) -> Any:
        """``scale`` (one scale for every judge, or judge -> scale) completed with the one scale the sources record
        (``recorded_scales``) for each judge it does not name; None when neither says anything (the spec or family
        then decides). What ``estimate`` reads a judge on."""
        if scale is not None and not isinstance(scale, Mapping):
            return scale
        named = dict(scale or {})
        names = sorted(set(self.frame["judge"].astype(str))) if judges is None else list(judges)
        recorded = self.recorded_scales([j for j in names if j not in named])
        return {**{j: sc.meta() for j, sc in recorded.items()}, **named} or None
