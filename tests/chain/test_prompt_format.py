"""The chain's shortcut for plain-text inputs writes exactly the prompt DSPy's JSONAdapter writes, given the
fenced inputs and the instructions with the notice that inputs are material (issue 11)."""

from __future__ import annotations

from dspy.adapters.json_adapter import JSONAdapter

from scijudge import get_spec
from scijudge.chain.fencing import fence_inputs, with_notice
from scijudge.spec.signatures import build_signature
from scijudge.chain.chain import StructuredChain


def test_plain_text_inputs_format_like_dspy():
    signature = build_signature(get_spec("yescieval.qa.correctness"))
    inputs = {"question": "Why?\n  with spaces ", "papers": "[1] T\nA {x} 'q' \"d\" ü",
              "answer": 'An answer: {"a": 1} [[ ## x ## ]]'}
    demos = [{"question": "Q", "papers": "[1] P", "answer": "A",
              "judgment": {"rationale": "r", "rating": 3}}]
    expected_signature = signature.with_instructions(with_notice(signature.instructions))
    expected = JSONAdapter().format(expected_signature, [fence_inputs(d, set(signature.input_fields)) for d in demos],
                                    fence_inputs(inputs))
    assert StructuredChain().format(signature, demos, inputs) == expected
    assert "[ [ ## x ## ] ]" in expected[-1]["content"] and "[[ ## x ## ]]" not in expected[-1]["content"]
