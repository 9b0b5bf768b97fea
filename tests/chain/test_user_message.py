"""The chain's user message is DSPy's, byte for byte, without DSPy's per-value TypeAdapter (issue 41)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("main_request", [False, True])
def test_the_user_message_equals_dspys_own(main_request):
    import dspy
    from dspy.adapters.chat_adapter import ChatAdapter

    from scijudge import get_spec
    from scijudge.chain.chain import StructuredChain

    class Mixed(dspy.Signature):
        """Rate it."""

        question: str = dspy.InputField()
        papers: list[str] = dspy.InputField()
        scores: dict = dspy.InputField()
        answer: str = dspy.OutputField()

    chain = StructuredChain()
    signature = get_spec("yescieval.qa.correctness")
    from scijudge.spec.signatures import build_signature

    for sig, inputs in ((build_signature(signature), {"question": "Q? é", "papers": "1. A\n2. B", "answer": "x"}),
                        (Mixed, {"question": "Q?", "papers": ["a", "b"], "scores": {"k": 1.5, "é": None}})):
        ours = chain.format_user_message_content(sig, inputs, prefix="P", suffix="S", main_request=main_request)
        theirs = ChatAdapter.format_user_message_content(chain, sig, inputs, prefix="P", suffix="S",
                                                         main_request=main_request)
        assert ours == theirs and "[[ ## question ## ]]" in ours
