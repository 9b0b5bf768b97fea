#!/usr/bin/env bash
# The GPU figure for issue 17: judgments/s of the local engine per prompt layout on one H200, Llama-3.1-8B-shaped
# random weights in bf16 with a random LoRA adapter, 1,800-token prompts, 9 rubrics x 64 items, 40 then (time
# allowing) 150 output tokens per judgment. Needs python3 with torch (CUDA), transformers, peft, numpy; NOT dspy.
# llguidance is installed from benchmarks/wheels/ when it is not importable (no network needed).
# Then (issue 25) decision mode vs generating 40 and 150 tokens on the same shapes (benchmarks/bench_decision.py,
# 9 rubrics x 64 items item-first, prefill only, 5 level tokens read at the answer position).
# The table goes to $OUT/gpu_results.txt (OUT defaults to ./gpu-out). Under 9 minutes on one H200 (layouts capped
# at 330 s by --time-budget, decision ~1-2 min incl. building the weights).
#
#   bash benchmarks/gpu_h200.sh                 # the figure
#   bash benchmarks/gpu_h200.sh --shape tiny --device cpu --out-tokens 40   # the same script on a CPU, tiny shape
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
if ! "$PY" -c "import llguidance" 2>/dev/null; then
  wheel=$(ls benchmarks/wheels/llguidance-*.whl 2>/dev/null | head -1 || true)
  if [ -n "$wheel" ]; then
    target="${TMPDIR:-/tmp}/scijudge-llguidance"
    "$PY" -m pip install --quiet --no-index --no-deps --target "$target" "$wheel"
    export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "llguidance is not installed and benchmarks/wheels/ has no wheel: decoding will be unconstrained" >&2
  fi
fi
"$PY" -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'peft', peft.__version__)"
if [ "$#" -eq 0 ]; then
  set -- --device cuda --shape llama-8b --out-tokens 40 150 --time-budget 330
fi
"$PY" benchmarks/bench_layouts.py "$@" --out "$OUT/gpu_results.txt"
if [ "${SKIP_DECISION:-0}" != "1" ]; then
  if [ "$#" -ge 2 ] && [ "$1" = "--device" ] && [ "$2" = "cpu" ]; then
    "$PY" benchmarks/bench_decision.py --device cpu --shape tiny --out "$OUT/gpu_results.txt"
  else
    "$PY" benchmarks/bench_decision.py --device cuda --shape llama-8b --rounds 2 --out "$OUT/gpu_results.txt"
  fi
fi

# --- distillation (issue 38): training steps/s and held-out exact agreement of the default recipe, Llama-3.1-8B
# shape in bf16, 500 items (350 train / 150 held out, 741-token prompts, batch 8, 2 epochs); ~3-4 min on one H200.
# On a CPU (`--device cpu`, as above) the same code path runs on the tiny shape: the dry run (SKIP_DISTILL=1 skips).
distill_section() {
  if [ "$#" -ge 2 ] && [ "$1" = "--device" ] && [ "$2" = "cpu" ]; then
    "$PY" benchmarks/bench_distill.py --device cpu --shape tiny --out "$OUT/gpu_results.txt"
  else
    "$PY" benchmarks/bench_distill.py --device cuda --shape llama-8b --out "$OUT/gpu_results.txt"
  fi
}
if [ "${SKIP_DISTILL:-0}" != "1" ]; then
  distill_section "$@"
fi
