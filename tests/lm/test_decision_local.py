"""Decision mode on the local engine: stored probabilities equal an independent transformers computation."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

_MISSING = [name for name in ("torch", "transformers", "peft") if find_spec(name) is None]
pytestmark = [pytest.mark.slow,  # builds and runs a tiny random transformers model
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING} (the local extra)")]

from scijudge import Item, Run, judge_items, load_judge  # noqa: E402
from scijudge.chain.decision import decision_messages, rating_only_instruction  # noqa: E402
from scijudge.judges.layout import apply_layout  # noqa: E402
from scijudge.lm import make_lm  # noqa: E402
from scijudge.lm.decision import plan_levels  # noqa: E402
from scijudge.lm.tiny import build_tiny_model  # noqa: E402

RUBRICS = ["yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.readability"]
PAPERS = [{"title": "Garnet electrolytes", "abstract": "Doping raised the ionic conductivity of the garnet."}]
ITEMS = [Item(id=f"q{i}", question=f"How does doping change conductivity in sample {i}?", papers=PAPERS,
              answer=f"Sample {i} conducts {i + 2} times better after doping.") for i in range(4)]
LEVELS = ["1", "2", "3", "4", "5"]


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_tiny_model(tmp_path_factory.mktemp("tiny_decision"), seed=3)


@pytest.fixture(scope="module")
def lm(paths):
    model = make_lm(f"hf:{paths['adapter']}", cache=False, max_batch_size=12, max_wait_ms=100)
    yield model
    model.engine.close()


def _independent(paths: dict[str, Path], prompts: list[list[dict[str, str]]]) -> list[list[float]]:
    """Softmax of the logits at the answer position over the level tokens, renormalised: one full forward per
    prompt with plain transformers + peft (no cache, no batching, no prefix sharing)."""
    import peft
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(paths["base"]))
    base = transformers.AutoModelForCausalLM.from_pretrained(str(paths["base"]), dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, str(paths["adapter"])).eval()
    level_ids = [tok.convert_tokens_to_ids(level) for level in LEVELS]
    out = []
    for messages in prompts:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -1].double()
        p = torch.softmax(logits, dim=-1)[level_ids]
        out.append((p / p.sum()).tolist())
    return out


def _messages(judge, item: Item) -> list[dict[str, str]]:
    system, chat = decision_messages(judge.chain, judge.signature, judge.demos, judge.inputs_for(item),
                                     rating_only_instruction(LEVELS))
    head = [{"role": "system", "content": system}] if system else []
    return head + [{"role": "user", "content": "".join(p.text for p in m.parts)} for m in chat]


def test_stored_probabilities_equal_an_independent_computation(lm, paths, tmp_path: Path) -> None:
    judges = [apply_layout(load_judge(n, lm=lm, mode="decision"), "item-first") for n in RUBRICS]
    before = len(lm.engine.batch_sizes)
    with Run(tmp_path / "decision.sqlite") as run:
        summary = judge_items(ITEMS, judges, run=run, concurrency=12)
        frame = run.to_pandas()
    assert summary.judged == len(ITEMS) * len(RUBRICS) and summary.abstained == 0
    assert max(lm.engine.batch_sizes[before:]) > 1  # batched across items and rubrics
    by_key = {(r.item_id, r.judge): r for r in frame.itertuples()}
    prompts, keys = [], []
    for judge in judges:
        for item in ITEMS:
            prompts.append(_messages(judge, item))
            keys.append((item.id, judge.name))
    expected = _independent(paths, prompts)
    for key, want in zip(keys, expected, strict=True):
        row = by_key[key]
        got = [row.probs[level] for level in LEVELS]
        assert got == pytest.approx(want, abs=1e-5)
        assert row.score == pytest.approx(sum(int(k) * p for k, p in zip(LEVELS, want, strict=True)), abs=1e-5)
        assert row.rationale is None and row.result["mode"] == "decision"


def test_decision_rows_resume_and_stay_apart_from_generated_ones(lm, tmp_path: Path) -> None:
    store = tmp_path / "both.sqlite"
    decided = [load_judge(RUBRICS[0], lm=lm, mode="decision", decision_score="mode")]
    with Run(store) as run:
        first = judge_items(ITEMS, decided, run=run, concurrency=4)
    with Run(store) as run:
        again = judge_items(ITEMS, decided, run=run, concurrency=4)
        frame = run.to_pandas()
    assert first.judged == len(ITEMS) and again.judged == 0 and again.skipped_done == len(ITEMS)
    assert all(float(s).is_integer() for s in frame["score"])  # the most likely level
    generated = load_judge(RUBRICS[0], lm=lm)
    assert generated.identity(ITEMS[0])[0].key != decided[0].identity(ITEMS[0])[0].key
    assert '"mode":"decision"' in decided[0].identity(ITEMS[0])[0].decoding


def test_zero_final_norm_gives_uniform_levels_and_the_midpoint(paths, tmp_path: Path) -> None:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(str(paths["base"]), dtype=torch.float32)
    with torch.no_grad():
        model.model.norm.weight.zero_()  # every logit is 0
    folder = tmp_path / "flat"
    model.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(str(paths["base"])).save_pretrained(folder)
    flat = make_lm(f"hf:{folder}", cache=False)
    try:
        judge = load_judge(RUBRICS[0], lm=flat, mode="decision")
        result = judge.judge_one(ITEMS[0])
        verdicts = load_judge("researchrubrics.checklist.ternary", lm=flat, mode="decision")
        item = Item(id="t1", question="Summarise the methods.", answer="The report compares three methods.",
                    meta={"rubrics": [{"criterion": "Names the methods.", "weight": 1.0, "axis": "Explicit Criteria"}]})
        verdict = verdicts.judge_one(item)
    finally:
        flat.engine.close()
    assert result.status == "ok" and all(p == 0.2 for p in result.probs.values())
    assert result.score == pytest.approx(3.0, abs=1e-12)
    assert verdict.status == "ok", verdict.reason
    assert list(verdict.probs) == ["satisfied", "partially", "not_satisfied"]
    assert all(p == pytest.approx(1 / 3, abs=1e-12) for p in verdict.probs.values())  # multi-token labels, chained
    assert verdict.score == pytest.approx(0.5, abs=1e-12)


def test_level_plans_chain_multi_token_levels() -> None:
    # "1" and "10" with split digits: the end token competes after "1"; one feed row reads P(next | "1")
    plan = plan_levels([(1,), (2,), (1, 0)], end_id=99)
    assert plan.children[()] == (1, 2) and plan.children[(1,)] == (0, 99) and plan.feeds == ((1,),)
    with pytest.raises(ValueError, match="prefix-free"):
        plan_levels([(1,), (1, 0)], end_id=None)


@pytest.mark.needs_extra("yescieval")
def test_native_preset_decides_inside_the_native_answer(lm, paths) -> None:
    """With --preset yescieval-native a local model reads YESciEval's own chat and its answer opened as the
    adapters write it, '{"Correctness": {"rating": "', so the next token is the rating."""
    from scijudge.judges.base import Judge
    from scijudge.spec.judge_spec import get_spec

    judge = Judge(get_spec(RUBRICS[0]).model_copy(update={"preset": "yescieval-native"}), lm=lm)
    judge.use_mode("decision")
    result = judge.judge_one(ITEMS[0])
    assert result.status == "ok", result.reason
    native = judge.preset.messages(judge.spec, judge.inputs_for(ITEMS[0]))
    import peft
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(paths["base"]))
    text = tok.apply_chat_template(native, tokenize=False, add_generation_prompt=True) + '{"Correctness": {"rating": "'
    base = transformers.AutoModelForCausalLM.from_pretrained(str(paths["base"]), dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(base, str(paths["adapter"])).eval()
    with torch.no_grad():
        logits = model(input_ids=tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]).logits[0, -1]
    p = torch.softmax(logits.double(), dim=-1)[[tok.convert_tokens_to_ids(level) for level in LEVELS]]
    assert [result.probs[level] for level in LEVELS] == pytest.approx((p / p.sum()).tolist(), abs=1e-5)
