"""The local engine's default dtype (issue 51): bfloat16 on CPUs that compute it natively (AMX, AVX-512 BF16),
float32 elsewhere, ``SCIJUDGE_LOCAL_DTYPE`` or an explicit ``dtype`` over both; a bf16 judgment records its dtype
in its decoding settings, and its decision probabilities stay close to float32's."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

from scijudge.errors import ModelError
from scijudge.lm import _models

needs_torch = pytest.mark.skipif(find_spec("torch") is None or find_spec("transformers") is None,
                                 reason="not installed: torch/transformers (the local extra)")


def test_the_default_is_bf16_only_where_the_cpu_has_it_and_the_override_wins(monkeypatch) -> None:
    monkeypatch.delenv(_models.DTYPE_ENV, raising=False)
    monkeypatch.setattr(_models, "native_bf16_cpu", lambda: True)
    assert _models.dtype_name(None, on_cuda=False) == "bfloat16"
    monkeypatch.setattr(_models, "native_bf16_cpu", lambda: False)
    assert _models.dtype_name("auto", on_cuda=False) == "float32"
    assert _models.dtype_name(None, on_cuda=True) == "bfloat16"
    monkeypatch.setattr(_models, "native_bf16_cpu", lambda: True)
    monkeypatch.setenv(_models.DTYPE_ENV, "float32")
    assert _models.dtype_name(None, on_cuda=False) == "float32"
    assert _models.dtype_name("bfloat16", on_cuda=False) == "bfloat16"  # an explicit dtype over the variable
    monkeypatch.setenv(_models.DTYPE_ENV, "int8")
    with pytest.raises(ModelError, match="unsupported dtype 'int8' \\(from the environment variable "
                                         "SCIJUDGE_LOCAL_DTYPE\\); use one of"):
        _models.dtype_name(None, on_cuda=False)
    with pytest.raises(ModelError, match="unsupported dtype 'int4'; use one of"):  # an argument: no variable named
        _models.dtype_name("int4", on_cuda=False)


@needs_torch
@pytest.mark.slow  # imports torch
@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="reads the CPU flags from /proc/cpuinfo")
def test_native_bf16_agrees_with_the_cpu_flags() -> None:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    assert _models.native_bf16_cpu() == bool(flags & {"amx_tile", "avx512_bf16"})


@needs_torch
@pytest.mark.slow  # builds the tiny model and loads it twice
def test_a_bf16_judgment_says_so_and_its_probabilities_stay_close_to_float32(tmp_path) -> None:
    from scijudge import Item, load_judge, make_lm
    from scijudge.lm.tiny import build_tiny_model

    paths = build_tiny_model(tmp_path / "tiny", seed=3, with_adapter=False)
    item = Item(id="i", question="What limits battery life?", answer="Cracking at high voltage [1].",
                papers=[{"title": "Capacity fade", "abstract": "Cycling at high voltage cracks particles."}])
    results = {}
    for dtype in ("float32", "bfloat16"):
        lm = make_lm(f"hf:{paths['base']}", cache=False, dtype=dtype)
        try:
            judge = load_judge("yescieval.qa.correctness", lm=lm, mode="decision")
            results[dtype] = judge.judge_one(item)
        finally:
            lm.engine.close()
    fp32, bf16 = results["float32"], results["bfloat16"]
    assert '"dtype"' not in fp32.decoding and '"dtype":"bfloat16"' in bf16.decoding
    assert fp32.key != bf16.key  # stored side by side, never one taken for the other
    p32, p16 = fp32.probs, bf16.probs
    assert p32 and p16 and set(p32) == set(p16)
    assert max(abs(p32[k] - p16[k]) for k in p32) < 0.05, (p32, p16)
