"""Issue 45, item 5: a mistyped local model (``distill --base hf:smolm2``) is not told to download a hub model."""

from __future__ import annotations

import pytest

from scijudge.errors import ScijudgeError
from scijudge.lm._models import parse_model_string


@pytest.mark.parametrize("model,says,never", [
    ("hf:smolm2", "did you mean hf:smollm2", "huggingface-cli download"),
    ("hf:/no/such/folder", "is not a folder here: give a local model folder", "huggingface-cli download"),
    ("hf:someorg/somemodel", "huggingface-cli download someorg/somemodel", "did you mean"),
])
def test_a_model_that_is_not_here_gets_the_advice_that_fits_it(model, says, never, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ScijudgeError) as info:
        parse_model_string(model)
    assert says in str(info.value) and never not in str(info.value), str(info.value)
