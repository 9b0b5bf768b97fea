"""Import a LeMaterial annotation folder: LLM-judge evaluations as judge results, human ones as labels.

Layout read (as published in LeMaterial/lematerial-llm-synthesis, ``annotations/``)::

    annotations/<paper>/result.json          LLM judge evaluations        (any depth: <paper> may be a/b)
    annotations/<paper>/result_human.json    human evaluations            (``results_human.json`` also read)

``result.json`` is either the *legacy* list ``[{"material", "synthesis", "evaluation"}]`` or the
*multi-LLM* list ``[{"synth_llm", "materials": [{"material", "synthesis", "evaluations": [{"judge_llm",
"evaluation"}]}]}]``. ``result_human.json`` is either the legacy list (same shape as result.json, the
evaluation written by a person) or a ``multi_llm_v1`` object ``{"extractor_order": [...], "materials":
[{"material_name", "human_recipe", "evaluations": [{"evaluation"}]}]}`` whose i-th evaluation judges
the extraction of the i-th extractor. An evaluation is ``{"reasoning", "scores": {"<criterion>_score",
"<criterion>_reasoning", "overall_score", ...}, "confidence_level", "missing_information", ...}``.

Items are keyed ``<paper>::<material>`` (legacy) or ``<paper>::<extractor>::<material>`` (multi-LLM).
Human and judge entries of one paper (and extractor) are paired by material name: names are normalised
(Unicode NFKC, case, whitespace, punctuation), scored with ``difflib.SequenceMatcher.ratio`` and paired
greedily, best first, one-to-one, when the ratio is at least ``match_threshold`` (default 0.8) **and**
the digits in both names agree. The digit rule matters for formulae: ``LiFePO4``/``LiFePO3`` have a
ratio of 0.86 and ``5CeGd``/``10CeGd`` differ only in a number, yet name different materials. 0.8 accepts
spelling and plural variants ("sulfur-doped graphene" / "sulphur doped graphene", 0.93; "ceramics" /
"ceramic", 0.98) but not added words ("Cu3Nb2O8" / "Cu3Nb2O8 ceramic powder", 0.52); lower it for
folders whose names carry such suffixes. A human entry left unpaired keeps its own name and is listed in
``unmatched_human``; a human label's overall score is the mean of its seven criteria (like the judge's).

Entries whose synthesis ``notes`` contain "Extraction failed" are skipped (both sides of a pair) and
counted; human evaluations with no scores at all (not yet annotated) are skipped and counted.
Folders named ``old`` (superseded copies) are not read.

Each criterion is its own judge, ``lematerial.synthesis.<criterion>`` (scale 1–5 step 0.5), beside the
overall ``lematerial.synthesis`` (the mean of seven criteria: a continuous 1–5 scale, see ``scales()``).
Every human score left out is listed in ``dropped`` with the rule applied: outside 1–5 (e.g. 0.0), not a
number, a criterion off the half-step grid, or a duplicate human entry for an item already labelled (the
first in file order is kept). Importers return records; the ``import-lematerial`` command writes the store.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from scijudge.errors import InputError, from_validation_error
from scijudge.labels import HumanLabel
from scijudge.materials.ontology import is_extraction_failure
from scijudge.materials.outputs import (
    SCORE_MAX,
    SCORE_MIN,
    SCORE_STEP,
    SynthesisJudgment,
)
from scijudge.spec.outputs import coerce_number
from scijudge.records import RUN_COLUMNS, JudgeResult, result_row

JUDGE_NAME = "lematerial.synthesis"
IMPORT_SPEC_HASH = "lematerial-import"
"""spec_hash of imported rows: they were not produced by a scijudge spec, so they never share a key with one."""
DEFAULT_MATCH_THRESHOLD = 0.8
_JUDGE_FILE = "result.json"
_HUMAN_FILES = ("result_human.json", "results_human.json")
_SKIPPED_DIRS = {"old"}


@dataclass
class _Entry:
    """One material's evaluation from one file, before pairing."""

    paper: str
    extractor: str
    material: str
    evaluation: Any
    failed: bool
    model: str
    file: Path
    slot: int = 0  # position of the material in its file; several evaluations of one material share it


@dataclass(frozen=True)
class DroppedScore:
    """A human score left out of the labels, and the rule that left it out."""

    item_id: str
    judge: str
    value: Any
    rule: str
    file: str

    def __str__(self) -> str:
        return f"{self.file}: {self.item_id} {self.judge} = {self.value!r}: {self.rule}"


@dataclass
class LeMaterialImport:
    """What an annotation folder yields: run-store rows, human labels, and what was skipped or unpaired."""

    results: list[JudgeResult] = field(default_factory=list)
    labels: list[HumanLabel] = field(default_factory=list)
    papers: list[str] = field(default_factory=list)
    skipped_failed: int = 0
    skipped_unannotated: int = 0
    unmatched_human: list[str] = field(default_factory=list)
    unmatched_judge: list[str] = field(default_factory=list)
    dropped: list[DroppedScore] = field(default_factory=list)
    judge: str = JUDGE_NAME
    criteria: bool = True

    def scales(self) -> dict[str, list[Any]]:
        """Scale per judge for calibration: the overall is continuous, each criterion on half steps."""
        out: dict[str, list[Any]] = {self.judge: [SCORE_MIN, SCORE_MAX, SCORE_STEP, "continuous"]}
        if self.criteria:
            out.update({f"{self.judge}.{c}": [SCORE_MIN, SCORE_MAX, SCORE_STEP] for c in SynthesisJudgment.CRITERIA})
        return out

    def drop_counts(self) -> dict[str, int]:
        """How many human scores each rule left out."""
        counts: dict[str, int] = {}
        for d in self.dropped:
            counts[d.rule] = counts.get(d.rule, 0) + 1
        return counts

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The judge results as run-store rows (``records.result_row``: the store's columns, ``key`` included)."""
        return [result_row(r) for r in self.results]

    def to_pandas(self) -> Any:
        """The judge results as a DataFrame with the run store's columns."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(RUN_COLUMNS))

    def labels_frame(self) -> Any:
        """The human labels as a DataFrame (one row per label)."""
        import pandas as pd

        return pd.DataFrame([label.model_dump() for label in self.labels],
                            columns=list(HumanLabel.model_fields))


def normalize_material_name(name: str) -> str:
    """Material name for matching: NFKC, casefold, punctuation to spaces, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = re.sub(r"[^\w.+%]+", " ", text)
    return " ".join(text.split())


def material_similarity(a: str, b: str) -> float:
    """Similarity in [0, 1] of two material names; 0 when their digit sequences differ (formulae)."""
    na, nb = normalize_material_name(a), normalize_material_name(b)
    if na == nb:
        return 1.0
    if re.findall(r"\d+(?:\.\d+)?", na) != re.findall(r"\d+(?:\.\d+)?", nb):
        return 0.0
    return difflib.SequenceMatcher(None, na, nb, autojunk=False).ratio()


def match_materials(
    left: list[str], right: list[str], threshold: float = DEFAULT_MATCH_THRESHOLD
) -> dict[int, int]:
    """Pair names one-to-one, best similarity first, keeping pairs at or above ``threshold``."""
    candidates = [
        (material_similarity(a, b), i, j)
        for i, a in enumerate(left) for j, b in enumerate(right)
    ]
    candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
    pairs: dict[int, int] = {}
    used: set[int] = set()
    for score, i, j in candidates:
        if score < threshold:
            break
        if i in pairs or j in used:
            continue
        pairs[i] = j
        used.add(j)
    return pairs


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"is not valid JSON: {exc.msg} (column {exc.colno})", file=path, line=exc.lineno) from exc
    except OSError as exc:
        raise InputError(f"cannot be read ({exc.strerror})", file=path) from exc


def _require_list(data: Any, path: Path, what: str) -> list[Any]:
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of {what}, got {type(data).__name__}", file=path)
    return data


def _material_of(entry: Mapping[str, Any]) -> str:
    name = entry.get("material") or entry.get("material_name")
    if not name:
        synthesis = entry.get("synthesis") or entry.get("human_recipe") or {}
        name = synthesis.get("target_compound") if isinstance(synthesis, Mapping) else None
    return str(name or "").strip() or "(unnamed)"


def _judge_entries(paper: str, path: Path, default_model: str) -> list[_Entry]:
    data = _require_list(_load(path), path, "evaluated materials")
    out: list[_Entry] = []
    for i, block in enumerate(data):
        if not isinstance(block, Mapping):
            raise InputError("each entry must be a JSON object", file=path, field=f"[{i}]")
        if isinstance(block.get("materials"), list):  # multi-LLM: one block per extractor
            extractor = str(block.get("synth_llm") or f"extractor{i}")
            for k, mat in enumerate(block["materials"]):
                if not isinstance(mat, Mapping):
                    raise InputError("each material must be a JSON object", file=path, field=f"[{i}].materials[{k}]")
                failed = is_extraction_failure(mat)
                evaluations = mat.get("evaluations") or []
                for e in evaluations if evaluations else [{}]:
                    out.append(_Entry(paper, extractor, _material_of(mat), (e or {}).get("evaluation"), failed,
                                      str((e or {}).get("judge_llm") or default_model), path, slot=k))
        else:
            out.append(_Entry(paper, "", _material_of(block), block.get("evaluation"), is_extraction_failure(block),
                              default_model, path, slot=i))
    return out


def _human_entries(paper: str, path: Path) -> list[_Entry]:
    data = _load(path)
    if isinstance(data, Mapping):  # multi_llm_v1
        order = data.get("extractor_order") or []
        materials = data.get("materials")
        if not isinstance(materials, list):
            raise InputError("a multi_llm_v1 file needs a 'materials' list", file=path, field="materials")
        out: list[_Entry] = []
        for k, mat in enumerate(materials):
            if not isinstance(mat, Mapping):
                raise InputError("each material must be a JSON object", file=path, field=f"materials[{k}]")
            failed = is_extraction_failure(mat.get("human_recipe") or {})
            for idx, e in enumerate(mat.get("evaluations") or []):
                extractor = str(order[idx]) if idx < len(order) else f"extractor{idx}"
                out.append(_Entry(paper, extractor, _material_of(mat), (e or {}).get("evaluation"), failed, "", path,
                                  slot=k))
        return out
    data = _require_list(data, path, "evaluated materials")
    return [
        _Entry(paper, "", _material_of(e), e.get("evaluation"), is_extraction_failure(e), "", path, slot=i)
        for i, e in enumerate(data) if isinstance(e, Mapping)
    ]


_OUT_OF_RANGE = f"outside the scale {SCORE_MIN:g}-{SCORE_MAX:g}"
_NOT_NUMBER = "not a number"
_OFF_GRID = f"criterion score not on the {SCORE_STEP:g}-step grid"
_DUPLICATE = "duplicate human entry for an item already labelled (the first in file order is kept)"


def _human_scores(evaluation: Any) -> tuple[dict[str, float], float | None, str, list[tuple[str, Any, str]]]:
    """Criterion scores (1-5 on half steps), the stated overall, the reasoning, and each score left out
    as (name, value, rule)."""
    if not isinstance(evaluation, Mapping):
        return {}, None, "", []
    found = evaluation.get("scores")
    scores: Mapping[str, Any] = found if isinstance(found, Mapping) else evaluation
    out: dict[str, float] = {}
    dropped: list[tuple[str, Any, str]] = []
    for name in (*SynthesisJudgment.CRITERIA, "overall"):
        raw = scores.get(f"{name}_score")
        if raw is None or raw == "":
            continue
        try:
            value = coerce_number(raw)
        except ValueError:
            dropped.append((name, raw, _NOT_NUMBER))
            continue
        if not SCORE_MIN <= value <= SCORE_MAX:
            dropped.append((name, raw, _OUT_OF_RANGE))
        elif name != "overall" and abs(value / SCORE_STEP - round(value / SCORE_STEP)) > 1e-9:
            dropped.append((name, raw, _OFF_GRID))
        else:
            out[name] = value
    overall = out.pop("overall", None)
    reasoning = str(evaluation.get("reasoning") or scores.get("overall_reasoning") or "")
    return out, overall, reasoning, dropped


def _item_ids(entries: list[_Entry]) -> list[str]:
    """Stable item ids; repeated names within one paper and extractor get '#2', '#3'..."""
    seen: dict[tuple[str, str, str], int] = {}
    by_slot: dict[tuple[str, str, int], str] = {}
    ids = []
    for e in entries:
        slot = (e.paper, e.extractor, e.slot)
        if slot not in by_slot:
            key = (e.paper, e.extractor, e.material)
            seen[key] = seen.get(key, 0) + 1
            name = e.material if seen[key] == 1 else f"{e.material}#{seen[key]}"
            by_slot[slot] = "::".join(p for p in (e.paper, e.extractor, name) if p)
        ids.append(by_slot[slot])
    return ids


def _created_at(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat()


def _judge_result(entry: _Entry, item_id: str, judge: str) -> JudgeResult:
    base: dict[str, Any] = {
        "item_id": item_id, "judge": judge, "part": "", "family": "synthesis", "spec_hash": IMPORT_SPEC_HASH,
        "model": entry.model, "created_at": _created_at(entry.file),
    }
    try:
        judgment = SynthesisJudgment.model_validate(entry.evaluation if entry.evaluation is not None else {})
    except ValidationError as exc:
        error = from_validation_error(exc, field_prefix="evaluation")
        return JudgeResult(status="abstained", reason=f"{entry.file}: {error.field}: {error.reason}", **base)
    fields = judgment.run_fields()
    return JudgeResult(status="ok", score=fields.score, confidence=fields.confidence,
                       result=judgment.model_dump(mode="json"), rationale=fields.rationale, **base)


def _criterion_results(overall: JudgeResult, judge: str) -> list[JudgeResult]:
    """One row per criterion (judge ``<judge>.<criterion>``) from an overall row; an abstention abstains all."""
    out = []
    for name in SynthesisJudgment.CRITERIA:
        common = overall.model_dump(exclude={"judge", "score", "result", "rationale", "confidence"})
        if overall.status != "ok":
            out.append(JudgeResult(judge=f"{judge}.{name}", **common))
            continue
        crit = (overall.result or {}).get(name) or {}
        out.append(JudgeResult(judge=f"{judge}.{name}", score=crit.get("score"), confidence=overall.confidence,
                               rationale=crit.get("reasoning"), result={"criterion": name, **crit}, **common))
    return out


def _unique_order(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _paper_folders(root: Path) -> list[Path]:
    names = {_JUDGE_FILE, *_HUMAN_FILES}
    found = {p.parent for p in root.rglob("*.json") if p.name in names}
    return sorted(d for d in found if not (_SKIPPED_DIRS & set(d.relative_to(root).parts)))


def load_lematerial_annotations(
    folder: str | Path,
    *,
    judge: str = JUDGE_NAME,
    match_threshold: float = DEFAULT_MATCH_THRESHOLD,
    criteria: bool = True,
    human_overall: Literal["mean", "stated"] = "mean",
    annotator: str = "human",
    model: str = "lematerial-judge",
) -> LeMaterialImport:
    """Read a LeMaterial ``annotations/`` folder into judge-result rows and human labels.

    Args:
        folder: the annotations folder (one sub-folder per paper).
        judge: judge name written on rows and labels.
        match_threshold: least name similarity (0-1) for pairing a human entry with a judge entry.
        criteria: also emit one judge per criterion (``<judge>.<criterion>``): judge rows and human labels.
        human_overall: a human label's overall score: the mean of the seven criteria (comparable with the
            judge's recomputed overall) or the overall the annotator wrote.
        annotator: annotator name for the labels (the files do not name one).
        model: model name for legacy judge rows (legacy files do not name the judge model).
    """
    root = Path(folder)
    if not root.is_dir():
        raise InputError("is not a folder", file=root)
    if not 0.0 < match_threshold <= 1.0:
        raise InputError(f"must be in (0, 1], got {match_threshold}", field="match_threshold")
    result = LeMaterialImport(judge=judge, criteria=criteria)
    for paper_dir in _paper_folders(root):
        paper = paper_dir.relative_to(root).as_posix()
        result.papers.append(paper)
        judge_path = paper_dir / _JUDGE_FILE
        judges = _judge_entries(paper, judge_path, model) if judge_path.is_file() else []
        human_path = next((paper_dir / n for n in _HUMAN_FILES if (paper_dir / n).is_file()), None)
        humans = _human_entries(paper, human_path) if human_path else []
        _import_paper(result, judges, humans, judge=judge, threshold=match_threshold, criteria=criteria,
                      human_overall=human_overall, annotator=annotator)
    return result


def _import_paper(
    result: LeMaterialImport,
    judges: list[_Entry],
    humans: list[_Entry],
    *,
    judge: str,
    threshold: float,
    criteria: bool,
    human_overall: str,
    annotator: str,
) -> None:
    """Pair one paper's entries per extractor, then emit rows and labels."""
    judge_ids = _item_ids(judges)
    # one material may carry several judge evaluations (multi-LLM): pair humans with distinct materials
    materials: dict[str, list[str]] = {}
    for e, item_id in zip(judges, judge_ids, strict=True):
        ids = materials.setdefault(e.extractor, [])
        if item_id not in ids:
            ids.append(item_id)
    failed_items = {item_id for e, item_id in zip(judges, judge_ids, strict=True) if e.failed}
    names_of = {item_id: e.material for e, item_id in zip(judges, judge_ids, strict=True)}

    human_ids = _item_ids(humans)
    duplicate_of: dict[int, str] = {}
    for extractor in _unique_order(h.extractor for h in humans):
        idx = [k for k, h in enumerate(humans) if h.extractor == extractor]
        candidates = materials.get(extractor, [])
        pairs = match_materials([humans[k].material for k in idx], [names_of[c] for c in candidates], threshold)
        for local, k in enumerate(idx):
            if local in pairs:
                human_ids[k] = candidates[pairs[local]]
            elif candidates:
                best = max(candidates, key=lambda c: material_similarity(humans[k].material, names_of[c]))
                if material_similarity(humans[k].material, names_of[best]) >= threshold:
                    duplicate_of[k] = best  # it matches a material another human entry already took
    paired_items = set()
    labelled: set[str] = set()
    counted_failed: set[str] = set()

    for k, h in enumerate(humans):
        item_id = human_ids[k]
        if h.failed or item_id in failed_items:
            counted_failed.add(item_id)
            continue
        crits, stated, reasoning, dropped = _human_scores(h.evaluation)
        if not crits and stated is None and not dropped:
            result.skipped_unannotated += 1
            continue
        if k in duplicate_of or item_id in labelled:
            result.dropped.append(DroppedScore(duplicate_of.get(k, item_id), judge, h.material, _DUPLICATE,
                                               str(h.file)))
            continue
        labelled.add(item_id)
        for name, value, rule in dropped:
            result.dropped.append(DroppedScore(item_id, judge if name == "overall" else f"{judge}.{name}", value,
                                               rule, str(h.file)))
        if not crits and stated is None:
            continue
        if item_id in names_of:
            paired_items.add(item_id)
        else:
            result.unmatched_human.append(item_id)
        complete = len(crits) == len(SynthesisJudgment.CRITERIA)
        overall = sum(crits.values()) / len(crits) if complete and human_overall == "mean" else stated
        if overall is None and complete:
            overall = sum(crits.values()) / len(crits)
        if overall is not None:
            result.labels.append(HumanLabel(item_id=item_id, judge=judge, score=overall, annotator=annotator,
                                            rationale=reasoning or None))
        if criteria:
            for name, value in crits.items():
                result.labels.append(HumanLabel(item_id=item_id, judge=f"{judge}.{name}", score=value,
                                                annotator=annotator))

    for e, item_id in zip(judges, judge_ids, strict=True):
        if item_id in failed_items:
            counted_failed.add(item_id)
            continue
        row = _judge_result(e, item_id, judge)
        result.results.append(row)
        if criteria:
            result.results.extend(_criterion_results(row, judge))
    result.skipped_failed += len(counted_failed)
    result.unmatched_judge.extend(
        i for i in _unique_order(judge_ids) if i not in paired_items and i not in failed_items and humans
    )


def expand_criteria(frame: Any) -> Any:
    """Per-criterion rows from synthesis/linking rows (``part`` = criterion, ``score`` = its score).

    Works on imported rows and on live runs alike, so calibration can compare judges and humans per
    criterion; rows that are abstentions or lack a result are dropped.
    """
    import pandas as pd

    from scijudge.materials.outputs import LinkingJudgment

    criteria = {"synthesis": SynthesisJudgment.CRITERIA, "linking": LinkingJudgment.CRITERIA}
    out = []
    for row in frame.to_dict("records"):
        names = criteria.get(row.get("family"))
        result = row.get("result")
        if not names or row.get("status") != "ok" or not isinstance(result, Mapping):
            continue
        for name in names:
            crit = result.get(name)
            if isinstance(crit, Mapping) and crit.get("score") is not None:
                out.append({**row, "key": f"{row['key']}|{name}", "part": name, "score": float(crit["score"]),
                            "rationale": crit.get("reasoning")})
    return pd.DataFrame(out, columns=list(frame.columns))
