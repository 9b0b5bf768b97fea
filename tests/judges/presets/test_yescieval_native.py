"""Issue 16: YESciEval's native prompt for its released judges (tiny local model and scripted engine), the QA
rubrics' task-context block, and papers given as a title -> abstract mapping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scijudge.data import Item
from scijudge.errors import InputError, SpecError
from scijudge.judges.base import Judge
from scijudge.judges.build import load_judge
from scijudge.spec.judge_spec import get_spec
from scijudge.testing.scripted import scripted_lm

PAPERS = {"Perovskite films under damp heat": "Films kept 80% of their efficiency after 1,000 h at 85 C.",
          "Encapsulation of perovskite modules": "Glass-glass encapsulation stopped moisture ingress."}
ITEM = Item(id="q1", question="How can perovskite cells be kept stable?", papers=PAPERS,  # a mapping
            answer="Encapsulation blocks moisture [2], and films keep most of their efficiency under damp heat [1].")

# Written out by hand from yescieval 0.10's PointwiseRubric.user_prompt_template and render_papers
# (yescieval/base/rubric.py).
EXPECTED_USER = (
    "Evaluate and rate the quality of the following scientific synthesis according to the characteristics "
    "given in the system prompt.\n\n"
    "<scientific-synthesis>\nEncapsulation blocks moisture [2], and films keep most of their efficiency under "
    "damp heat [1].\n</scientific-synthesis>\n\n"
    "<research-question>\nHow can perovskite cells be kept stable?\n</research-question>\n\n"
    "<paper-titles-and-abstracts>\n"
    "1. Perovskite films under damp heat\n\nFilms kept 80% of their efficiency after 1,000 h at 85 C.\n\n"
    "2. Encapsulation of perovskite modules\n\nGlass-glass encapsulation stopped moisture ingress.\n\n"
    "\n</paper-titles-and-abstracts>\n\n###"
)
# The preset reads YESciEval's prompt text from the installed package (the `yescieval` extra).
needs_yescieval = pytest.mark.needs_extra("yescieval")


def _native_judge(lm: Any, name: str = "yescieval.qa.correctness") -> Judge:
    return Judge(get_spec(name).model_copy(update={"preset": "yescieval-native"}), lm=lm)


def test_items_accept_papers_as_a_title_to_abstract_mapping() -> None:
    listed = Item(id="q1", papers=[{"title": t, "abstract": a} for t, a in PAPERS.items()])
    assert [p.title for p in ITEM.papers] == list(PAPERS)
    assert ITEM.papers_text() == listed.papers_text()
    assert ITEM.papers_text().startswith("[1] Perovskite films under damp heat\nFilms kept 80%")
    with pytest.raises(ValueError):
        Item(id="q2", papers=["just a title"])


@needs_yescieval
def test_native_prompt_layout_and_answer_are_parsed_without_a_retry() -> None:
    answer = '{"Correctness": {"rating": "4", "rationale": "Both claims match the abstracts."}}'
    lm = scripted_lm(lambda request: "Here is my evaluation:\n" + answer)
    result = _native_judge(lm).judge_one(ITEM)
    assert result.status == "ok" and result.score == 4.0 and result.rationale == "Both claims match the abstracts."
    assert [a.strategy for a in result.attempts] == ["native_text"] and result.attempts[0].outcome == "ok"
    (request,) = lm.engine.requests
    assert request.config.response_format is None  # free text, as the adapters were trained
    assert [p.text for p in request.messages[0].parts] == [EXPECTED_USER]
    system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
    sections = ["<Context>", "<Role>", "<Task-Description>", "<Evaluation-Characteristic>", "<Rating-Scale>",
                "<Response-Format>", "<Note>"]
    positions = [system.index(tag) for tag in sections]
    assert positions == sorted(positions)
    assert "1. Correctness:" in system and "1 (very bad) to 5 (very good)" in system
    assert '"Correctness"' in system or "Correctness" in system.split("<Response-Format>")[1]


@needs_yescieval
def test_unreadable_native_answer_falls_back_to_the_structured_chain() -> None:
    def respond(request: Any) -> str:
        if request.config.response_format is None:
            return "I would rate this synthesis as fairly good overall."  # no JSON: not readable
        return json.dumps({"judgment": {"rationale": "structured retry", "rating": 2}})

    lm = scripted_lm(respond)
    result = _native_judge(lm).judge_one(ITEM)
    assert result.status == "ok" and result.score == 2.0 and result.rationale == "structured retry"
    assert [(a.strategy, a.outcome) for a in result.attempts] == [("native_text", "parse_error"), ("json_schema", "ok")]
    curly = "{\u201cCorrectness\u201d: {\u2018rating\u2019: \u20185\u2019, \u2018rationale\u2019: \u2018fine\u2019}}"
    assert _native_judge(scripted_lm(lambda r: curly)).judge_one(ITEM).score == 5.0  # typographic quotes read


@needs_yescieval
def test_preset_is_refused_where_no_native_layout_exists() -> None:
    with pytest.raises(SpecError, match="Likert rubric"):
        Judge(get_spec("lematerial.synthesis").model_copy(update={"preset": "yescieval-native"}),
              lm=scripted_lm(lambda r: ""))
    with pytest.raises(SpecError, match="unknown preset"):
        Judge(get_spec("yescieval.qa.correctness").model_copy(update={"preset": "nope"}), lm=scripted_lm(lambda r: ""))


def test_task_context_block_is_on_by_default_and_can_be_switched_off() -> None:
    from scijudge.spec.signatures import render_instructions

    for name in ("correctness", "completeness", "informativeness", "coherence", "integration", "relevancy",
                 "cohesion", "conciseness", "readability"):
        spec = get_spec(f"yescieval.qa.{name}")
        text = render_instructions(spec)
        assert "Task context:" in text and "no more than 200 words" in text and "single paragraph" in text, name
        assert "Task context" not in render_instructions(spec.with_blocks(task_context=""))
    off = load_judge("yescieval.qa.readability", lm=scripted_lm(lambda r: ""), blocks={"task_context": ""})
    assert "Task context" not in render_instructions(off.spec)


def test_rubric_wording_keeps_the_source_meaning() -> None:
    def words(name: str) -> str:
        spec = get_spec(f"yescieval.qa.{name}")
        return " ".join([spec.description, spec.instructions, *spec.scale.anchors.values()]).lower()

    integration = get_spec("yescieval.qa.integration").scale.anchors
    assert "single" in integration["4"] and "single" in integration["5"] and "several paragraphs" in integration["2"]
    assert "200 words" in words("conciseness") and "even when the answer is long" not in words("conciseness")
    assert "academic" in words("readability") and "wall of text" not in words("readability")
    assert "how strong the evidence is" not in words("informativeness")


@needs_yescieval
def test_cli_block_and_preset_options(tmp_path: Path) -> None:
    from scijudge.judges.presets import apply_blocks_and_preset
    from scijudge.spec.signatures import render_instructions

    specs = [get_spec("yescieval.deep.depth.causal_reasoning"), get_spec("yescieval.deep.breadth.scope_coverage")]
    vocab = tmp_path / "vocab.md"
    vocab.write_text("- soil respiration, priming effect\n")
    filled = apply_blocks_and_preset(specs, blocks=[f"domain_vocabulary={vocab}", "examples=builtin:ecology"])
    causal, scope = (render_instructions(s) for s in filled)
    assert "Domain vocabulary:\n- soil respiration, priming effect" in causal
    assert "Worked examples:" in causal and "fenced-plot experiment" in causal  # shipped for causal_reasoning
    assert "Worked examples:" not in scope  # nothing shipped for scope_coverage: the block stays empty
    shipped = apply_blocks_and_preset(specs, blocks=["domain_vocabulary=builtin:nlp"])
    assert "instruction tuning" in render_instructions(shipped[0])
    for bad, message in (("nonsense", "NAME=FILE"), ("colour=x.md", "none of the selected judges"),
                         (f"examples={tmp_path / 'missing.md'}", "not found"),
                         ("examples=builtin:astrology", "no shipped blocks")):
        with pytest.raises(InputError, match=message):
            apply_blocks_and_preset(specs, blocks=[bad])
    (qa,) = apply_blocks_and_preset([get_spec("yescieval.qa.coherence")], blocks=["task_context="],
                                    preset="yescieval-native")
    assert qa.preset == "yescieval-native" and qa.blocks["task_context"].text == ""
    assert qa.spec_hash() != get_spec("yescieval.qa.coherence").spec_hash()
    from scijudge.spec.judge_spec import resolve_judges

    mixed = apply_blocks_and_preset(resolve_judges(["yescieval.qa.coherence*"]), blocks=[], preset="yescieval-native")
    assert {s.name: s.preset for s in mixed} == {"yescieval.qa.coherence": "yescieval-native",
                                                "yescieval.qa.coherence.pairwise": None}  # no native pairwise
    with pytest.raises(SpecError, match="Likert rubric"):
        apply_blocks_and_preset([get_spec("lematerial.linking")], blocks=[], preset="yescieval-native")


@pytest.mark.slow
@needs_yescieval
def test_native_prompt_on_the_tiny_local_model(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The exact native chat reaches the model: the token ids it reads are the source's own
    ``apply_chat_template(messages, add_generation_prompt=True)`` of the hand-written user message."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    from scijudge.lm.local import local_lm
    from scijudge.lm.tiny import build_tiny_model

    paths = build_tiny_model(tmp_path_factory.mktemp("tiny_native"), seed=0)
    lm = local_lm(f"hf:{paths['adapter']}", cache=False, max_tokens=16, max_batch_size=1, max_wait_ms=0)
    try:
        runtime = lm.engine._runtime
        seen: list[tuple[list[dict[str, str]], list[int]]] = []
        original = runtime.encode_chat

        def spy(messages: list[dict[str, str]]) -> list[int]:
            ids = original(messages)
            seen.append(([dict(m) for m in messages], ids))
            return ids

        runtime.encode_chat = spy
        from scijudge.chain.chain import ChainConfig, StructuredChain

        judge = Judge(get_spec("yescieval.qa.correctness").model_copy(update={"preset": "yescieval-native"}), lm=lm,
                      chain=StructuredChain(ChainConfig(strategies=())))  # the native request only: keep it fast
        result = judge.judge_one(ITEM)
        messages, ids = seen[0]
        assert [m["role"] for m in messages] == ["system", "user"]
        assert messages[1]["content"] == EXPECTED_USER
        assert messages[0]["content"] == judge.preset.system_prompt(judge.spec)
        expected_text = runtime.tokenizer.apply_chat_template(
            [{"role": "system", "content": messages[0]["content"]}, {"role": "user", "content": EXPECTED_USER}],
            tokenize=False, add_generation_prompt=True)
        assert ids == runtime.tokenizer(expected_text, add_special_tokens=False)["input_ids"]
        assert len(seen) == 1 and result.attempts[0].strategy == "native_text"  # random weights: answer is noise
    finally:
        runtime.encode_chat = original
        lm.engine.close()


def test_docs_table_shows_the_shipped_wording_beside_the_source() -> None:
    table = (Path(__file__).resolve().parents[3] / "docs" / "rubrics.md").read_text(encoding="utf-8")
    for name in ("correctness", "completeness", "informativeness", "coherence", "integration", "relevancy",
                 "cohesion", "conciseness", "readability"):
        spec = get_spec(f"yescieval.qa.{name}")
        assert f"## {name.capitalize()}" in table and spec.description in table, name
        for level in range(1, 6):
            assert spec.scale.anchors[str(level)] in table, (name, level)
    assert "as a single paragraph?" in table  # the source's integration question, quoted for comparison


@needs_yescieval
def test_cli_judge_with_block_and_preset(tmp_path: Path, loopback: Any) -> None:
    from typer.testing import CliRunner

    from scijudge.cli import app
    from scijudge.run.store import Run

    bodies: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> str:
        bodies.append(body)
        if body.get("response_format") is None:
            return '{"Coherence": {"rating": "3", "rationale": "native"}}'
        return json.dumps({"judgment": {"rationale": "structured", "rating": 4}})

    server = loopback(handler)
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps(ITEM.model_dump(exclude_defaults=True) | {"papers": PAPERS}) + "\n")
    base = ["judge", str(items), "-m", "openai/judge", "--api-base", server.url, "--no-progress"]
    env = {"OPENAI_API_KEY": "k", "COLUMNS": "200"}
    runner = CliRunner()
    ran = runner.invoke(app, [*base, "-j", "yescieval.deep.depth.causal_reasoning", "--run", str(tmp_path / "a.db"),
                              "--block", "domain_vocabulary=builtin:ecology"], env=env)
    assert ran.exit_code == 0, ran.output
    assert "nutrient cycling" in json.dumps(bodies[-1]) and "Domain vocabulary" in json.dumps(bodies[-1])
    ran = runner.invoke(app, [*base, "-j", "yescieval.qa.coherence", "--run", str(tmp_path / "b.db"),
                              "--preset", "yescieval-native"], env=env)
    assert ran.exit_code == 0, ran.output
    assert "<scientific-synthesis>" in json.dumps(bodies[-1]) and bodies[-1].get("response_format") is None
    (row,) = Run(tmp_path / "b.db", create=False).to_pandas().to_dict(orient="records")
    assert row["status"] == "ok" and row["score"] == 3.0 and row["rationale"] == "native"
    bad = runner.invoke(app, [*base, "-j", "yescieval.qa.coherence", "--block", "nope=x.md"], env=env)
    assert bad.exit_code != 0 and "none of the selected judges" in bad.output


@needs_yescieval
def test_preset_as_a_spec_field(tmp_path: Path) -> None:
    from scijudge._resources import shipped_path

    text = (shipped_path("signatures") / "yescieval.qa.relevancy.toml").read_text(encoding="utf-8")
    spec_file = tmp_path / "relevancy_native.toml"
    spec_file.write_text(text.replace('output = "likert"', 'output = "likert"\npreset = "yescieval-native"', 1))
    judge = load_judge(str(spec_file), lm=scripted_lm(lambda r: '{"Relevancy": {"rating": 5, "rationale": "on"}}'))
    assert judge.preset is not None and judge.spec.preset == "yescieval-native"
    result = judge.judge_one(ITEM)
    assert result.score == 5.0 and result.attempts[0].strategy == "native_text"
    assert judge.spec_hash != get_spec("yescieval.qa.relevancy").spec_hash()  # a different judgment identity
