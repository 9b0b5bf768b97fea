"""The real SmolLM2-135M-Instruct on CPU, the bundled items x the 9 QA rubrics: judgments/s with the item's prefix
shared (item-first layout, its KV computed once and kept across batches), with today's per-rubric prompts, and
with plain transformers on the same prompts, side by side in one run (issue 51 item 2).

Every scijudge row runs the real judges through ``judge_items`` (threads, ``--concurrency``, no response cache)
on ``hf:smollm2``:

* ``per-rubric prompts``: the default rubric-first layout, prefix reuse across batches off (what a run did
  before: each batch shares what its rows have in common, nothing is kept), in the comparison's dtype and, unless
  ``--skip-float32-row``, in float32: the engine's CPU dtype when issue 51 measured "the per-rubric prompts of
  today" (the row its goals are stated against; bf16 where the CPU computes it natively is one of the issue's
  levers);
* ``item-first, no reuse``: item-first prompts, reuse across batches off (only within a batch);
* ``item-first, shared prefix``: item-first prompts with the prefix store (``scijudge.lm._prefix``).

Plain transformers get the exact prompts the item-first run sent (captured from the engine, rendered with the
same chat template): ``model(input_ids)`` and the last position's logits for decision mode, greedy
``model.generate`` with the same token budget for generated mode, one prompt at a time. The ratios printed are
judgments/s of the shared-prefix row over each other row. ``--dtypes`` and ``--threads`` repeat the decision
shared-prefix row per dtype and torch thread count on the first item. Prints the load average before each row.

    python benchmarks/bench_smollm2.py                        # 2 items x 9 rubrics decision, 1 x 9 generated
    python benchmarks/bench_smollm2.py --items 12 --gen-items 12 --dtype float32    # the whole bundled set
    python benchmarks/bench_smollm2.py --skip-generate --dtypes float32 bfloat16 --threads 1 2
    python benchmarks/bench_smollm2.py --skip-float32-row   # without the per-rubric float32 row (the goals' reference)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
FLOAT32_ROW = "per-rubric prompts, float32"
RUBRICS = [f"yescieval.qa.{q}" for q in ("correctness", "completeness", "informativeness", "coherence",
                                          "integration", "relevancy", "cohesion", "conciseness", "readability")]


def _load(dtype: str, max_tokens: int) -> Any:
    from scijudge import make_lm
    from scijudge.commands._progress import quiet_local_models

    quiet_local_models()
    return make_lm("hf:smollm2", cache=False, dtype=dtype, max_tokens=max_tokens, max_batch_size=8)


def run_scijudge(lm: Any, items: list, mode: str, layout: str, reuse: bool, concurrency: int) -> tuple[float, list]:
    """Judgments/s of one row through ``judge_items``, and the engine requests it sent (in order)."""
    from scijudge import judge_items, load_judge
    from scijudge.judges.layout import apply_layout

    engine = lm.engine
    store = engine._runtime.prefixes
    store.clear()
    store.budget, store.reused_tokens = (512 << 20) if reuse else 0, 0
    sent: list = []
    name = "submit_levels" if mode == "decision" else "submit"
    original = getattr(type(engine), name)

    def capture(request: Any, *args: Any) -> Any:
        sent.append(request)
        return original(engine, request, *args)

    setattr(engine, name, capture)
    try:
        judges = [apply_layout(load_judge(n, lm=lm, mode=mode), layout) for n in RUBRICS]
        wall0 = time.perf_counter()
        summary = judge_items(items, judges, None, concurrency=concurrency)
        wall = time.perf_counter() - wall0
    finally:
        delattr(engine, name)
    assert summary.ok == len(items) * len(RUBRICS), summary
    return summary.ok / wall, sent


def warm(lm: Any, item: Any, mode: str) -> None:
    """One untimed judgment on ``lm``, so that no row pays the first call's set-up (allocations, the grammar)."""
    from scijudge import judge_items, load_judge

    judge_items([item], [load_judge(RUBRICS[0], lm=lm, mode=mode)], None, concurrency=1)


def run_plain(lm: Any, requests: list, mode: str, max_tokens: int) -> float:
    """Judgments/s of plain transformers on the same prompts, one at a time, no cache reuse or batching."""
    import torch

    from scijudge.lm.local import _chat_messages

    runtime = lm.engine._runtime
    model = runtime.model
    prompts = [torch.tensor([runtime.chat_prompt(_chat_messages(r))[1]]) for r in requests]
    wall0 = time.perf_counter()
    with torch.inference_mode():
        for ids in prompts:
            if mode == "decision":
                model(input_ids=ids, logits_to_keep=1).logits[0, -1].float().softmax(-1)
            else:
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                               do_sample=False, pad_token_id=runtime.pad_id)
    return len(prompts) / (time.perf_counter() - wall0)


def compare(lm: Any, items: list, mode: str, args: argparse.Namespace, before: Any = None) -> None:
    """The rows of one mode, then the ratios of the shared-prefix row to the others. ``before``: the same model
    loaded in float32 (the engine's CPU dtype before bf16 became the default where the CPU has it): its
    per-rubric row too."""
    rows: dict[str, float] = {}
    sent: list = []
    for model in (lm, before) if before is not None else (lm,):
        warm(model, items[0], mode)
    if before is not None:
        load = os.getloadavg()[0]
        label = FLOAT32_ROW
        rows[label], requests = run_scijudge(before, items, mode, "rubric-first", False, args.concurrency)
        print(f"{mode:>9} {label:<30} {rows[label]:8.3f} j/s   ({len(requests)} judgments, load {load:.1f})",
              flush=True)
    dtype = str(lm.engine._runtime.model.dtype).removeprefix("torch.")
    for label, layout, reuse in ((f"per-rubric prompts, {dtype}", "rubric-first", False),
                                 ("item-first, no reuse", "item-first", False),
                                 ("item-first, shared prefix", "item-first", True)):
        load = os.getloadavg()[0]
        rate, requests = run_scijudge(lm, items, mode, layout, reuse, args.concurrency)
        rows[label] = rate
        if reuse:
            sent = requests
        reused = lm.engine._runtime.prefixes.reused_tokens
        print(f"{mode:>9} {label:<30} {rate:8.3f} j/s   ({len(requests)} judgments, load {load:.1f}, "
              f"{reused} prompt tokens reused)", flush=True)
    load = os.getloadavg()[0]
    label = "plain transformers " + ("model(...)" if mode == "decision" else f"generate {args.max_tokens}")
    rows[label] = run_plain(lm, sent, mode, args.max_tokens)
    print(f"{mode:>9} {label:<30} {rows[label]:8.3f} j/s   ({len(sent)} prompts, load {load:.1f})", flush=True)
    shared = rows["item-first, shared prefix"]
    goal = 3 if mode == "decision" else 2
    print(f"{mode:>9} ratios of the shared-prefix row: "
          + ", ".join(f"{shared / rate:.2f}x {name}" for name, rate in rows.items() if rate != shared), flush=True)
    if FLOAT32_ROW in rows:
        ratio = shared / rows[FLOAT32_ROW]
        print(f"{mode:>9} issue 51's goal: >= {goal}x the per-rubric prompts as they ran when it was filed (float32): "
              f"{ratio:.2f}x, {'met' if ratio >= goal else 'NOT met'}", flush=True)


def settings(items: list, args: argparse.Namespace) -> None:
    """Decision mode, item-first with the shared prefix, on one item: per dtype and torch thread count."""
    import torch

    for dtype in args.dtypes:
        lm = _load(dtype, args.max_tokens)
        for threads in args.threads:
            torch.set_num_threads(threads)
            load = os.getloadavg()[0]
            rate, _ = run_scijudge(lm, items[:1], "decision", "item-first", True, args.concurrency)
            print(f"decision, item-first shared prefix, {dtype}, {threads} torch threads: {rate:.3f} j/s "
                  f"(load {load:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2, help="bundled items judged in decision mode (of 12)")
    parser.add_argument("--gen-items", type=int, default=1, help="bundled items judged in generated mode")
    parser.add_argument("--max-tokens", type=int, default=48, help="token budget of a generated answer")
    parser.add_argument("--dtype", default="bfloat16", help="dtype of the main comparison")
    parser.add_argument("--concurrency", type=int, default=8, help="judgments in flight (the CLI's default)")
    parser.add_argument("--torch-threads", type=int, default=None, help="torch threads of the main comparison")
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--skip-float32-row", action="store_true",
                        help="leave out the per-rubric prompts in float32 (the engine's CPU dtype when issue 51 was "
                             "filed: the reference of its goals)")
    parser.add_argument("--float32-row", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--dtypes", nargs="*", default=[], help="also: decision rates per dtype (first item)")
    parser.add_argument("--threads", nargs="*", type=int, default=[], help="... and per torch thread count")
    args = parser.parse_args()
    import torch

    from scijudge import load_items

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    items = load_items(ROOT / "datasets" / "yescieval_example" / "items.jsonl")[0]
    print(f"SmolLM2-135M-Instruct (hf:smollm2), {args.dtype}, {torch.get_num_threads()} torch threads, "
          f"{os.cpu_count()} CPUs, concurrency {args.concurrency}; load average {os.getloadavg()[0]:.1f}")
    lm = _load(args.dtype, args.max_tokens)
    before = _load("float32", args.max_tokens) if not args.skip_float32_row and args.dtype != "float32" else None
    compare(lm, items[: args.items], "decision", args, before)
    if not args.skip_generate:
        compare(lm, items[: args.gen_items], "generate", args, before)
    if args.dtypes or args.threads:
        args.dtypes = args.dtypes or [args.dtype]
        args.threads = args.threads or [torch.get_num_threads()]
        settings(items, args)


if __name__ == "__main__":
    main()
