"""The local transformers+PEFT engine through dspy.LM, on a tiny random Llama model and LoRA adapter built here."""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path

import pytest

# The local extra is checked without importing it, so that collecting this module stays cheap.
_MISSING = [name for name in ("torch", "transformers", "peft") if find_spec(name) is None]
pytestmark = [pytest.mark.slow,  # builds and runs a tiny random transformers model
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING} (the local extra)")]

import dspy  # noqa: E402
import jsonschema  # noqa: E402
from dspy.lm15 import Config, Message, Request, Response  # noqa: E402
from dspy.utils.exceptions import ContextWindowExceededError  # noqa: E402

from scijudge.errors import ModelError  # noqa: E402
from scijudge.lm.local import LocalEngine, local_lm  # noqa: E402
from scijudge.lm.logprobs import rating_distribution  # noqa: E402
from scijudge.lm.tiny import build_tiny_model  # noqa: E402

LIKERT_SCHEMA = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string"},
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["rationale", "rating"],
    "additionalProperties": False,
}
LIKERT_FORMAT = {"type": "json_schema", "json_schema": {"name": "Likert", "schema": LIKERT_SCHEMA, "strict": True}}
SYSTEM = (
    "You are a careful reviewer of scientific writing. Read the research question, the paper abstracts and "
    "the synthesis, then rate the correctness of the synthesis from 1 to 5 and explain the rating briefly."
)
ITEMS = [f"Synthesis {i}: the catalyst raised the yield by {5 * i} percent in {i + 2} trials." for i in range(10)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    paths = build_tiny_model(tmp_path_factory.mktemp("tiny"), seed=0)
    second = build_tiny_model(tmp_path_factory.mktemp("tiny2"), seed=7)
    # A second adapter for the same base: same architecture, other random LoRA weights.
    adapter_b = paths["base"].parent / "adapter_b"
    shutil.copytree(second["adapter"], adapter_b)
    config = json.loads((adapter_b / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(paths["base"])
    (adapter_b / "adapter_config.json").write_text(json.dumps(config))
    return {**paths, "adapter_b": adapter_b}


@pytest.fixture(scope="module")
def lm(tiny: dict[str, Path]) -> Iterator[dspy.LM]:
    model = local_lm(f"hf:{tiny['adapter']}", cache=False, max_tokens=40, max_batch_size=8, max_wait_ms=50)
    yield model
    model.engine.close()  # unloads the shared model once no engine uses it


def _request(lm: dspy.LM, text: str, *, system: str | None = SYSTEM, **config: object) -> Request:
    return Request(model=lm.model, messages=(Message.user(text),), system=system, config=Config(**config))


def _likert_config(**extra: object) -> dict[str, object]:
    return {"max_tokens": 40, "response_format": {"type": "json_schema", "schema": LIKERT_SCHEMA}, **extra}


def test_model_string_forms_resolve_to_one_shared_base(tiny: dict[str, Path], lm: dspy.LM) -> None:
    engine = lm.engine
    assert isinstance(engine, LocalEngine)
    assert engine.ref.base == tiny["base"].resolve() and engine.ref.adapter == tiny["adapter"].resolve()
    explicit = LocalEngine(f"hf:{tiny['base']}+{tiny['adapter']}")
    try:
        assert explicit.ref == engine.ref
        assert explicit._runtime is engine._runtime  # same base and settings: loaded once
    finally:
        explicit.close()
    assert engine.dtype == "float32"  # CPU default


def test_every_json_schema_answer_validates(lm: dspy.LM) -> None:
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda item: lm(item, response_format=LIKERT_FORMAT)[0], ITEMS))
    for text in outputs:
        jsonschema.validate(json.loads(text), LIKERT_SCHEMA)
    # json_object: a random model may nest objects until the token budget ends ("length"); every answer
    # that the grammar let finish is a JSON object.
    json_object = {"type": "json_object"}
    answers = [lm(_request(lm, item, system=None, max_tokens=40, response_format=json_object)) for item in ITEMS]
    finished = [a for a in answers if a.finish_reason == "stop"]
    assert finished and all(isinstance(json.loads(a.text), dict) for a in finished)


def test_pydantic_response_format_and_finish_reason(lm: dspy.LM) -> None:
    import pydantic

    class Likert(pydantic.BaseModel):
        rationale: str
        rating: int = pydantic.Field(ge=1, le=5)

    text = lm("Rate this synthesis.", response_format=Likert)[0]
    assert 1 <= Likert.model_validate_json(text).rating <= 5
    response = lm(_request(lm, "Write freely.", max_tokens=3))
    assert isinstance(response, Response)
    assert response.finish_reason == "length" and response.usage.output_tokens == 3
    done = lm(_request(lm, "Rate it.", **_likert_config()))
    assert done.finish_reason == "stop"
    events = list(lm.engine.stream(_request(lm, "Rate it.", **_likert_config())))
    assert events[0].type == "start" and events[-1].type == "end" and events[-1].finish_reason == "stop"


def test_batched_greedy_equals_unbatched_greedy(lm: dspy.LM) -> None:
    requests = [_request(lm, item, **_likert_config()) for item in ITEMS]
    requests += [_request(lm, item, system="Judge briefly.", max_tokens=12) for item in ITEMS[:3]]  # unconstrained
    alone = [lm(request).text for request in requests]
    before = len(lm.engine.batch_sizes)
    with ThreadPoolExecutor(len(requests)) as pool:
        together = list(pool.map(lambda request: lm(request).text, requests))
    assert max(lm.engine.batch_sizes[before:]) > 1  # really batched
    assert together == alone


def test_rating_probabilities_sum_to_one(lm: dspy.LM) -> None:
    scored = lm.copy(logprobs=True, top_logprobs=5)
    for item in ITEMS[:4]:
        output = scored(item, response_format=LIKERT_FORMAT)[0]
        dist = rating_distribution(output["logprobs"]["content"])
        assert dist is not None and set(dist) == {1, 2, 3, 4, 5}
        assert sum(dist.values()) == pytest.approx(1.0, abs=1e-9)
        # Greedy decoding picks the most probable allowed rating: the written rating is the argmax.
        assert json.loads(output["text"])["rating"] == max(dist, key=dist.get)


def test_logprobs_reach_the_prediction(lm: dspy.LM) -> None:
    class Judge(dspy.Signature):
        """Rate the synthesis."""

        synthesis: str = dspy.InputField()
        rationale: str = dspy.OutputField()
        rating: int = dspy.OutputField()

    with dspy.context(lm=lm.copy(logprobs=True, top_logprobs=3), adapter=dspy.JSONAdapter()):
        prediction = dspy.Predict(Judge)(synthesis=ITEMS[0])
    tokens = prediction.logprobs["content"]
    assert "".join(t["token"] for t in tokens).startswith("{")
    assert all(len(t["top_logprobs"]) <= 3 for t in tokens)


def test_seeded_sampling_repeats_and_stop_sequence_cuts_the_text(lm: dspy.LM) -> None:
    sampled = {"max_tokens": 24, "temperature": 1.0, "seed": 11}
    free = lm(_request(lm, "Say anything.", **sampled)).text
    assert lm(_request(lm, "Say anything.", **sampled)).text == free  # same seed, same sample
    stop = next(free[i : i + 2] for i in range(3, len(free) - 2) if free[i : i + 2] not in free[: i + 1])
    cut = lm(_request(lm, "Say anything.", stop=(stop,), **sampled))
    assert cut.text == free[: free.index(stop)]
    assert cut.finish_reason == "stop"


def test_two_adapters_switch_without_reloading_the_base(tiny: dict[str, Path], lm: dspy.LM) -> None:
    first = lm(_request(lm, ITEMS[0], **_likert_config())).text
    other = local_lm(f"hf:{tiny['adapter_b']}", cache=False)
    base = local_lm(f"hf:{tiny['base']}", cache=False)
    try:
        assert other.engine._runtime is lm.engine._runtime is base.engine._runtime
        assert lm.engine._runtime.merged is None  # several users: adapters stay unmerged and switch per batch
        texts = {
            name: [model(_request(model, item, **_likert_config())).text for item in ITEMS[:4]]
            for name, model in {"a": lm, "b": other, "base": base}.items()
        }
        assert texts["a"][0] == first  # merged and unmerged adapter A agree
        assert texts["a"] != texts["b"] and texts["a"] != texts["base"]
    finally:
        other.engine.close()
        base.engine.close()
    assert lm(_request(lm, ITEMS[0], **_likert_config())).text == first
    assert lm.engine._runtime.merged is not None  # alone again: merged back before that batch


def test_adapter_naming_a_missing_base_says_which(tmp_path: Path, tiny: dict[str, Path]) -> None:
    adapter = tmp_path / "orphan"
    shutil.copytree(tiny["adapter"], adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "nobody/no-such-base-model"
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError) as info:
        local_lm(f"hf:{adapter}")
    message = str(info.value)
    assert "adapter_config.json" in message and "nobody/no-such-base-model" in message
    assert "base_model_name_or_path" in message


def test_corrupt_weight_files_give_clear_errors(tmp_path: Path, tiny: dict[str, Path]) -> None:
    base = tmp_path / "base"
    shutil.copytree(tiny["base"], base)
    (base / "model.safetensors").write_bytes(b"this is not a safetensors file")
    with pytest.raises(ModelError, match=r"model\.safetensors"):
        local_lm(f"hf:{base}")
    adapter = tmp_path / "adapter"
    shutil.copytree(tiny["adapter"], adapter)
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    with pytest.raises(ModelError, match=r"adapter_model\.safetensors"):
        local_lm(f"hf:{tiny['base']}+{adapter}")


def test_unknown_model_string_and_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="hf:"):
        local_lm("openai/gpt-4o")
    with pytest.raises(ModelError, match="is not a folder here: give a local model folder"):
        local_lm(f"hf:{tmp_path / 'absent'}")  # a path: no download advice
    with pytest.raises(ModelError, match="never downloads"):
        local_lm("hf:no-such-owner/no-such-model")  # a hub id that is not in the local cache


def test_prompt_longer_than_the_context_is_a_context_window_error(lm: dspy.LM) -> None:
    window = lm.engine._runtime.context
    with pytest.raises(ContextWindowExceededError, match="context window"):
        lm("evidence " * (window + 10))


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.lm import _extra

    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(ModelError, match=r"pip install 'scijudge\[local\]'"):
        _extra.require_peft()


def test_no_grammar_backend_is_logged_and_unconstrained(
    tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from scijudge.lm import _grammar

    monkeypatch.setattr(_grammar, "installed_backends", lambda: [])
    with caplog.at_level(logging.WARNING, logger="scijudge.lm.local"):
        free = local_lm(f"hf:{tiny['base']}", cache=False, dtype="float32", device_map="cpu")  # a fresh runtime
    try:
        assert "WITHOUT constraints" in caplog.text
        response = free(_request(free, "Rate it.", **_likert_config(max_tokens=6)))
        assert response.provider_data["grammar"] is None
    finally:
        free.engine.close()


def test_saved_program_reloads_with_its_local_lm(tmp_path: Path, lm: dspy.LM) -> None:
    class Judge(dspy.Signature):
        """Rate the synthesis."""

        synthesis: str = dspy.InputField()
        rationale: str = dspy.OutputField()
        rating: int = dspy.OutputField()

    program = dspy.Predict(Judge)
    program.set_lm(lm)
    with dspy.context(adapter=dspy.JSONAdapter()):
        before = program(synthesis=ITEMS[1])
    path = tmp_path / "program.json"
    program.save(str(path))
    assert json.loads(path.read_text())["lm"]["engine"]["state"]["model"] == lm.model
    restored = dspy.Predict(Judge)
    restored.load(str(path), allow_unsafe_lm_state=True)
    assert isinstance(restored.lm.engine, LocalEngine) and restored.lm.model == lm.model
    with dspy.context(adapter=dspy.JSONAdapter()):
        after = restored(synthesis=ITEMS[1])
    assert (after.rationale, after.rating) == (before.rationale, before.rating)


def test_async_calls_are_batched_too(lm: dspy.LM) -> None:
    import asyncio

    requests = [_request(lm, item, **_likert_config()) for item in ITEMS[:6]]
    alone = [lm(request).text for request in requests]
    before = len(lm.engine.batch_sizes)

    async def all_at_once() -> list[str]:
        responses = await asyncio.gather(*(lm.acall(request) for request in requests))
        return [response.text for response in responses]

    assert asyncio.run(all_at_once()) == alone
    assert max(lm.engine.batch_sizes[before:]) > 1


def test_deep_copied_program_shares_the_loaded_model(lm: dspy.LM) -> None:
    import copy

    program = dspy.Predict("synthesis -> rating: int")
    program.set_lm(lm)
    clone = copy.deepcopy(program)
    assert clone.lm is not lm and clone.lm.engine is lm.engine  # optimizers deep-copy programs: no second model


def test_a_schema_the_grammar_cannot_compile_is_an_invalid_request(lm: dspy.LM) -> None:
    from dspy.utils.exceptions import LMInvalidRequestError

    bad = {"type": "json_schema", "schema": {"type": "string", "pattern": "(?<=a)b"}}  # lookbehind: no grammar
    with pytest.raises(LMInvalidRequestError, match="unsupported response_format"):
        lm(_request(lm, "Rate it.", max_tokens=8, response_format=bad))


def test_each_attempt_keeps_the_local_models_reply(lm: dspy.LM) -> None:
    from scijudge import Item, Judge, StructuredChain
    from scijudge.spec.judge_spec import JudgeSpec

    spec = JudgeSpec(name="test.local_reply", family="likert", description="d", instructions="Rate it.",
                     inputs=[{"name": "question"}, {"name": "answer"}])
    judge = Judge(spec, lm=lm, chain=StructuredChain())
    item = Item(id="r1", question="Why is the sky blue?", answer=ITEMS[1])
    first = judge.judge_one(item).attempts[0]
    # greedy: the same request sent to the engine directly gives the same text back
    request = judge.chain.lm15_request(lm.model, judge.signature, judge.demos, judge.inputs_for(item, ""),
                                       strategy=first.strategy, temperature=first.temperature,
                                       max_tokens=first.max_tokens)
    assert first.reply and first.reply == lm(request).text
