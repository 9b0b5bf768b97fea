"""YESciEval's rubric prompts, read from an installed ``yescieval`` package (>= 0.10) without importing it.

Importing any ``yescieval`` module runs ``yescieval/__init__.py``, which imports transformers, peft, torch and
openai (about 16 s). The prompts are module-level string constants bound to the rubric classes'
``system_prompt_template`` defaults, so they are read from the package's source files with ``ast`` (no code of
the package runs); the user-message templates are the ``user_prompt_template`` defaults of ``PointwiseRubric`` /
``PairwiseRubric`` in ``yescieval/base/rubric.py``. The text is the package's (MIT, SciKnowOrg); none of it is
shipped with scijudge. Checked equal to the imported classes' defaults and ``instruct()`` for all 33 classes.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from scijudge.errors import YESciEvalMissing

MIN_VERSION = (0, 10)
INSTALL_HINT = "pip install 'scijudge[yescieval]'"


@dataclass(frozen=True)
class NativeRubric:
    cls: str                 # class name, e.g. "CausalReasoning"
    name: str                # the rubric's ``name`` field (= JSON key of the answer)
    eval_type: str           # "pointwise" | "pairwise"
    group: str               # folder: fidelity, structural, stylistic, depth, breadth, rigor, gap, innovation
    module: str              # dotted module, e.g. yescieval.rubric.pointwise.depth.causal_reasoning
    system_prompt: str       # the raw template (may hold {X_VOCAB} / {EXAMPLE_RESPONSES} placeholders)
    user_template: str       # the base class's user template (str.format fields below)
    inputs: tuple[str, ...]  # fields of user_template
    scale: tuple[int, int]   # from the <Rating-Scale> section
    characteristic: str      # text of the <Evaluation-Characteristic(s)> section
    placeholders: tuple[str, ...] = field(default=())


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


@lru_cache(maxsize=1)
def package_root() -> tuple[Path, str]:
    """(path of the installed ``yescieval`` package folder, version) — found via its metadata, not imported."""
    try:
        dist = md.distribution("yescieval")  # the dist is named "YESciEval"; lookup is normalised
    except md.PackageNotFoundError:
        raise YESciEvalMissing(f"the yescieval-native preset reads YESciEval's prompts from the yescieval "
                               f"package, which is not installed: {INSTALL_HINT}") from None
    version = dist.version
    if _version_tuple(version) < MIN_VERSION:
        raise YESciEvalMissing(f"yescieval {version} is installed; the yescieval-native preset needs >= "
                               f"{'.'.join(map(str, MIN_VERSION))}: {INSTALL_HINT}")
    root = Path(str(dist.locate_file("yescieval")))
    if not (root / "base" / "rubric.py").is_file():
        raise YESciEvalMissing(f"yescieval {version} is installed but {root}/base/rubric.py is missing")
    return root, version


def _string_assigns(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def _class_defaults(cls: ast.ClassDef, consts: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out[node.target.id] = v.value
            elif isinstance(v, ast.Name) and v.id in consts:
                out[node.target.id] = consts[v.id]
    return out


@lru_cache(maxsize=1)
def user_templates() -> dict[str, str]:
    """{"pointwise": ..., "pairwise": ...} from base/rubric.py (the ("a" "b") concatenation is one Constant)."""
    root, _ = package_root()
    tree = ast.parse((root / "base" / "rubric.py").read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("PointwiseRubric", "PairwiseRubric"):
            d = _class_defaults(node, {})
            out[d["eval_type"]] = d["user_prompt_template"]
    return out


_SCALE = re.compile(r"<Rating-Scale>.*?from\s+(\d+)\s*\(very bad\)\s*to\s+(\d+)\s*\(very good\)", re.S | re.I)
_CHAR = re.compile(r"<Evaluation-Characteristics?>\s*(.*?)\s*</Evaluation-Characteristics?>", re.S)
_PH = re.compile(r"\{[A-Z_]+\}")
_FIELDS = re.compile(r"(?<!\{)\{([a-z_]+)\}(?!\})")


@lru_cache(maxsize=1)
def native_rubrics() -> dict[tuple[str, str], NativeRubric]:
    """Every rubric class in the installed package, keyed by (eval_type, class name)."""
    root, _ = package_root()
    users = user_templates()
    out: dict[tuple[str, str], NativeRubric] = {}
    for path in sorted((root / "rubric").glob("*/*/*.py")):
        if path.name == "__init__.py":
            continue
        eval_type, group = path.parts[-3], path.parts[-2]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        consts = _string_assigns(tree)
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            d = _class_defaults(node, consts)
            if "system_prompt_template" not in d:
                continue
            sp = d["system_prompt_template"]
            m = _SCALE.search(sp)
            c = _CHAR.search(sp)
            ut = users[eval_type]
            out[(eval_type, node.name)] = NativeRubric(
                cls=node.name, name=d.get("name", node.name), eval_type=eval_type, group=group,
                module="yescieval." + ".".join(path.relative_to(root).with_suffix("").parts),
                system_prompt=sp, user_template=ut,
                inputs=tuple(dict.fromkeys(_FIELDS.findall(ut))),
                scale=(int(m.group(1)), int(m.group(2))) if m else (0, 0),
                characteristic=c.group(1).strip() if c else "",
                placeholders=tuple(dict.fromkeys(_PH.findall(sp))),
            )
    return out


def system_prompt(cls_name: str, eval_type: str = "pointwise", *, fill_placeholders: str | None = "") -> str:
    """The exact system prompt of a rubric class.

    ``fill_placeholders``: None leaves ``{X_VOCAB}`` / ``{EXAMPLE_RESPONSES}`` as the package does when no
    domain is given (YESciEval's own behaviour: ``Rubric.verbalize_system_prompt`` only substitutes when
    ``domain`` is set); a string (default "") replaces each such placeholder with it.
    """
    r = native_rubrics()[(eval_type, cls_name)]
    sp = r.system_prompt
    if fill_placeholders is not None:
        for ph in r.placeholders:
            sp = sp.replace(ph, fill_placeholders)
    return sp


def render_papers(papers: Any) -> str:
    """YESciEval's paper rendering (base/rubric.py ``Rubric.render_papers``): "k. title\\n\\nabstract\\n\\n"."""
    items = papers.items() if hasattr(papers, "items") else papers
    return "".join(f"{i}. {t}\n\n{a}\n\n" for i, (t, a) in enumerate(items, 1))


def messages(cls_name: str, *, question: str, papers: Any, answer: str | None = None, answer_a: str | None = None,
             answer_b: str | None = None, eval_type: str = "pointwise",
             fill_placeholders: str | None = "") -> list[dict[str, str]]:
    """The chat YESciEval's ``Rubric.instruct()`` would build (system + user), without importing yescieval."""
    r = native_rubrics()[(eval_type, cls_name)]
    user = r.user_template.format(question=question, content=render_papers(papers),
                                  **({"answer": answer} if eval_type == "pointwise" else
                                     {"answer_a": answer_a, "answer_b": answer_b}))
    return [{"role": "system", "content": system_prompt(cls_name, eval_type, fill_placeholders=fill_placeholders)},
            {"role": "user", "content": user}]


SPEC_CLASSES: dict[str, str] = {
    "yescieval.qa.correctness": "Correctness", "yescieval.qa.completeness": "Completeness",
    "yescieval.qa.informativeness": "Informativeness", "yescieval.qa.coherence": "Coherence",
    "yescieval.qa.integration": "Integration", "yescieval.qa.relevancy": "Relevancy",
    "yescieval.qa.cohesion": "Cohesion", "yescieval.qa.conciseness": "Conciseness",
    "yescieval.qa.readability": "Readability",
    "yescieval.deep.depth.mechanistic_understanding": "MechanisticUnderstanding",
    "yescieval.deep.depth.causal_reasoning": "CausalReasoning",
    "yescieval.deep.depth.temporal_precision": "TemporalPrecision",
    "yescieval.deep.breadth.context_coverage": "ContextCoverage",
    "yescieval.deep.breadth.dimension_coverage": "DimensionCoverage",
    "yescieval.deep.breadth.method_coverage": "MethodCoverage",
    "yescieval.deep.breadth.scale_coverage": "ScaleCoverage",
    "yescieval.deep.breadth.scope_coverage": "ScopeCoverage",
    "yescieval.deep.rigor.epistemic_calibration": "EpistemicCalibration",
    "yescieval.deep.rigor.explicit_uncertainty": "ExplicitUncertainty",
    "yescieval.deep.rigor.quantitative_evidence": "QuantitativeEvidenceAndUncertainty",
    "yescieval.deep.gap_identification": "GapIdentification",
    "yescieval.deep.novelty": "StateOfTheArtAndNovelty",
}
"""scijudge spec name -> yescieval rubric class (explicit: two names differ, novelty and quantitative evidence)."""
