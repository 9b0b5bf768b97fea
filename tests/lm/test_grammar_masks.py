"""The llguidance backend fills token masks itself, identical to llguidance.torch's, without importing it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llguidance")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow  # builds a tiny tokenizer and model; one test starts a subprocess

from scijudge.lm._grammar import GrammarSpec, LLGuidanceBackend, fill_bitmask_row, fill_bitmask_rows  # noqa: E402
from scijudge.lm.tiny import build_tiny_model  # noqa: E402

SCHEMA = {"type": "object", "properties": {"rationale": {"type": "string", "maxLength": 40},
                                           "rating": {"type": "integer", "enum": [1, 2, 3, 4, 5]}},
          "required": ["rationale", "rating"], "additionalProperties": False}
PREFIXES = ['', '{"', '{"rationale": "good', '{"rationale": "ok", "rating": ', '{"rationale": "ok", "rating": 4}']


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), with_adapter=False)["base"]


@pytest.fixture(scope="module")
def backend(base: Path) -> LLGuidanceBackend:
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    return LLGuidanceBackend(tokenizer, len(tokenizer), [tokenizer.eos_token_id])


def _matchers(backend: LLGuidanceBackend) -> list:
    spec = GrammarSpec("json_schema", json.dumps(SCHEMA))
    tokenizer = backend.tokenizer
    matchers = []
    for prefix in PREFIXES:
        matcher = backend.matcher(spec)
        for token in tokenizer.encode(prefix, add_special_tokens=False):
            assert matcher.accept(token), prefix
        matchers.append(matcher)
    return matchers


def test_masks_equal_llguidance_torch_row_by_row_and_in_parallel(backend: LLGuidanceBackend) -> None:
    import llguidance
    import llguidance.torch as reference  # the module the engine no longer imports, here only to compare

    matchers = _matchers(backend)
    words = (backend.vocab_size + 31) // 32
    ours, theirs = (torch.zeros((len(matchers), words), dtype=torch.int32) for _ in range(2))
    for row, matcher in enumerate(matchers):
        fill_bitmask_row(matcher.inner, ours, row)
        reference.fill_next_token_bitmask(matcher.inner, theirs, row)
    assert torch.equal(ours, theirs)
    assert len({tuple(r.tolist()) for r in ours}) >= 4  # the states differ, so the comparison means something

    par_ours, par_theirs = (torch.zeros_like(ours) for _ in range(2))
    pairs = [(m.inner, i) for i, m in enumerate(matchers)]
    fill_bitmask_rows(llguidance.LLExecutor(), pairs, par_ours)
    reference.fill_next_token_bitmask_par(llguidance.LLExecutor(), pairs, par_theirs)
    assert torch.equal(par_ours, par_theirs) and torch.equal(par_ours, theirs)
    through_backend = torch.zeros_like(ours)
    backend.fill_masks([(m, i) for i, m in enumerate(matchers)], through_backend)  # 5 rows: the parallel path
    assert torch.equal(through_backend, theirs)


def test_bad_bitmask_tensors_are_refused_before_any_pointer_is_used(backend: LLGuidanceBackend) -> None:
    import llguidance

    matcher = _matchers(backend)[0].inner
    words = (backend.vocab_size + 31) // 32
    with pytest.raises(ValueError, match="int32"):
        fill_bitmask_row(matcher, torch.zeros((1, words), dtype=torch.int64))
    with pytest.raises(ValueError, match="2-D"):
        fill_bitmask_row(matcher, torch.zeros(words, dtype=torch.int32))
    with pytest.raises(ValueError, match="contiguous"):
        fill_bitmask_rows(llguidance.LLExecutor(), [(matcher, 0)], torch.zeros((words, 2), dtype=torch.int32).t())
    with pytest.raises(ValueError, match="out of range"):
        fill_bitmask_rows(llguidance.LLExecutor(), [(matcher, 3)], torch.zeros((2, words), dtype=torch.int32))


def test_the_engine_never_imports_llguidance_torch_nor_inductor(base: Path) -> None:
    code = f"""
import json, sys
import transformers
from scijudge.lm._grammar import GrammarSpec, make_backend
tok = transformers.AutoTokenizer.from_pretrained({str(base)!r})
backend = make_backend("llguidance", tok, len(tok), [tok.eos_token_id])
import torch
m = backend.matcher(GrammarSpec("json_object"))
mask = torch.zeros((1, (len(tok) + 31) // 32), dtype=torch.int32)
m.fill_mask(mask, 0)
assert int(mask.ne(0).sum()) > 0
print(json.dumps(sorted(n for n in ("llguidance.torch", "torch._inductor", "torch._dynamo") if n in sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
