#!/usr/bin/env bash
# The GPU figure (issues 17, 25, 41): judgments/s of the local engine on one H200, Llama-3.1-8B-shaped random
# weights in bf16 with a random LoRA adapter, 1,800-token prompts (1,100 item + 400 boilerplate + 300 rubric),
# 9 rubrics x 64 items. Needs python3 with torch (CUDA), transformers, peft, numpy; NOT dspy. llguidance is
# installed from benchmarks/wheels/ when it is not importable (no network needed).
#
# Sections (each a function below; a section that would start with too little of the budget left is skipped and
# says so):
#   layouts   benchmarks/bench_layouts.py: per prompt layout, 40 then (time allowing) 150 output tokens
#   decision  benchmarks/bench_decision.py: decision mode vs generating 40 and 150 tokens (the engine's decoder),
#             beside plain transformers (one forward pass per batch; model.generate of 40 tokens)
#   distill   benchmarks/bench_distill.py: the distillation recipe's steps/s and held-out agreement (see below)
# The tables go to $OUT/gpu_results.txt (OUT defaults to ./gpu-out). One call stays under 9 minutes on one H200:
# the whole script is budgeted at BUDGET seconds (default 510), the layouts capped at 300 s by --time-budget.
#
#   bash benchmarks/gpu_h200.sh                 # the figure (one H200)
#   bash benchmarks/gpu_h200.sh --dry-run       # every section's code path on a CPU, tiny shape (a few minutes)
#   bash benchmarks/gpu_h200.sh --shape tiny --device cpu --out-tokens 40   # layouts with these arguments
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
BUDGET="${BUDGET:-510}"
STARTED=$(date +%s)
DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY_RUN=1
  shift
fi

left() { echo $(( BUDGET - ($(date +%s) - STARTED) )); }

# skip_unless SECONDS NAME: true when at least SECONDS of the budget are left, else says the section is skipped
skip_unless() {
  if [ "$(left)" -lt "$1" ]; then
    echo "($2 skipped: $(left) s of the ${BUDGET} s budget left, it needs about $1 s)" | tee -a "$OUT/gpu_results.txt"
    return 1
  fi
}

install_llguidance() {
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
}

run_layouts() {
  if [ "$#" -eq 0 ]; then
    if [ "$DRY_RUN" = "1" ]; then
      set -- --device cpu --shape tiny --out-tokens 40 --items 2 --time-budget 120
    else
      set -- --device cuda --shape llama-8b --out-tokens 40 150 --time-budget 300
    fi
  fi
  "$PY" benchmarks/bench_layouts.py "$@" --out "$OUT/gpu_results.txt"
}

run_decision() {
  if [ "${SKIP_DECISION:-0}" = "1" ]; then
    return 0
  fi
  if [ "$DRY_RUN" = "1" ] || { [ "$#" -ge 2 ] && [ "$1" = "--device" ] && [ "$2" = "cpu" ]; }; then
    "$PY" benchmarks/bench_decision.py --device cpu --shape tiny --rounds 1 --out "$OUT/gpu_results.txt"
  else
    skip_unless 150 "decision vs generated" || return 0
    "$PY" benchmarks/bench_decision.py --device cuda --shape llama-8b --rounds 2 --out "$OUT/gpu_results.txt"
  fi
}

# distill   benchmarks/bench_distill.py (issue 38): training steps/s and held-out exact agreement of the default
#           recipe, Llama-3.1-8B shape in bf16, 500 items (350 train / 150 held out, 741-token prompts, batch 8,
#           2 epochs); ~3-4 min on one H200, so after the layouts it usually runs in a second call:
#           SKIP_LAYOUTS=1 SKIP_DECISION=1 bash benchmarks/gpu_h200.sh   (SKIP_DISTILL=1 skips it)
run_distill() {
  if [ "${SKIP_DISTILL:-0}" = "1" ]; then
    return 0
  fi
  if [ "$DRY_RUN" = "1" ] || { [ "$#" -ge 2 ] && [ "$1" = "--device" ] && [ "$2" = "cpu" ]; }; then
    "$PY" benchmarks/bench_distill.py --device cpu --shape tiny --out "$OUT/gpu_results.txt"
  else
    skip_unless 240 "distillation" || return 0
    "$PY" benchmarks/bench_distill.py --device cuda --shape llama-8b --out "$OUT/gpu_results.txt"
  fi
}

install_llguidance
"$PY" -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__, 'peft', peft.__version__)"
if [ "${SKIP_LAYOUTS:-0}" != "1" ]; then
  run_layouts "$@"
fi
run_decision "$@"
run_distill "$@"
echo "done in $(( $(date +%s) - STARTED )) s; tables in $OUT/gpu_results.txt"
