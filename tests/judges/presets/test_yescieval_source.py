"""scijudge's 22 YESciEval specs against the installed yescieval package (0.10): same qualities, scales, inputs;
the prompt reader against the package's own classes; the install line when the package is absent."""

from __future__ import annotations

import importlib.metadata

import pytest

from scijudge.errors import ModelError
from scijudge.judges.presets import _yescieval_source as source
from scijudge.spec.judge_spec import get_spec, list_specs

needs_yescieval = pytest.mark.needs_extra("yescieval")
# What the two projects say differently, on purpose (each checked below rather than ignored):
NO_NATIVE_PAIRWISE = {"yescieval.qa.correctness", "yescieval.qa.completeness", "yescieval.qa.informativeness",
                      "yescieval.qa.coherence", "yescieval.qa.integration", "yescieval.qa.relevancy",
                      "yescieval.qa.cohesion", "yescieval.qa.conciseness", "yescieval.qa.readability",
                      "yescieval.deep.gap_identification", "yescieval.deep.novelty"}
YESCIEVAL_INPUTS = {"answer": "answer", "question": "question", "content": "papers"}


def _specs() -> list:
    return [s for s in list_specs() if s.name.startswith("yescieval.") and not s.name.endswith(".pairwise")]


@needs_yescieval
def test_the_22_specs_name_the_same_qualities_scales_and_inputs_as_yescieval() -> None:
    _, version = source.package_root()
    assert version.startswith("0.10")
    specs = {s.name: s for s in _specs()}
    assert set(specs) == set(source.SPEC_CLASSES) and len(specs) == 22
    native = source.native_rubrics()
    for name, cls in source.SPEC_CLASSES.items():
        spec, rubric = specs[name], native[("pointwise", cls)]
        assert rubric.name == cls, name  # the JSON key of the native answer
        assert rubric.scale == (int(spec.scale.min), int(spec.scale.max)) == (1, 5) and spec.scale.step == 1, name
        assert {YESCIEVAL_INPUTS[f] for f in rubric.inputs} == {i.name for i in spec.inputs}, name
        # the quality the spec names is the one the class's <Evaluation-Characteristic> section names first
        named = rubric.characteristic.removeprefix("1. ").split(":", 1)[0]
        assert named == cls, name
        quality = name.rsplit(".", 1)[-1].replace("_", "")  # e.g. causalreasoning, quantitativeevidence
        assert named.lower().startswith(quality) or quality in named.lower() or name.endswith("novelty"), name
        assert (("pairwise", cls) in native) == (name not in NO_NATIVE_PAIRWISE), name


@pytest.mark.slow  # importing yescieval imports torch, transformers and peft (~16 s)
@needs_yescieval
def test_the_prompt_reader_equals_the_packages_own_classes() -> None:
    import importlib

    native = source.native_rubrics()
    for cls in source.SPEC_CLASSES.values():
        rubric = native[("pointwise", cls)]
        module = importlib.import_module(rubric.module)
        imported = getattr(module, cls)
        assert imported.model_fields["system_prompt_template"].default == rubric.system_prompt, cls
        messages = imported(papers={"T1": "A1"}, question="Q?", answer="ANS").instruct()
        mine = source.messages(cls, question="Q?", papers={"T1": "A1"}, answer="ANS", fill_placeholders=None)
        assert messages == mine, cls


def test_without_the_package_the_preset_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.judges.base import Judge
    from scijudge.testing.scripted import scripted_lm

    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    source.package_root.cache_clear()
    monkeypatch.setattr(source.md, "distribution", missing)
    try:
        with pytest.raises(ModelError, match=r"pip install 'scijudge\[yescieval\]'") as caught:
            Judge(get_spec("yescieval.qa.correctness").model_copy(update={"preset": "yescieval-native"}),
                  lm=scripted_lm(lambda r: ""))
        assert "\n" not in str(caught.value)
    finally:
        source.package_root.cache_clear()
