"""The chain's shortcut for plain-text inputs writes exactly the prompt DSPy's JSONAdapter writes."""

from __future__ import annotations

from dspy.adapters.json_adapter import JSONAdapter

from scijudge import get_spec
from scijudge.signatures import build_signature
from scijudge.structured import StructuredChain


def test_plain_text_inputs_format_like_dspy():
    signature = build_signature(get_spec("yescieval.qa.correctness"))
    inputs = {"question": "Why?\n  with spaces ", "papers": "[1] T\nA {x} 'q' \"d\" ü",
              "answer": 'An answer: {"a": 1} [[ ## x ## ]]'}
    demos = [{"question": "Q", "papers": "[1] P", "answer": "A",
              "judgment": {"rationale": "r", "rating": 3}}]
    assert StructuredChain().format(signature, demos, inputs) == JSONAdapter().format(signature, demos, inputs)
