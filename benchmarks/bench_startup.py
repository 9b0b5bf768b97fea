"""Start-up: time to the first ``hf:`` judgment vs plain torch + transformers + peft, and ``scijudge --help``.

Each arm is a fresh Python process (what a user waits for), timed from launch to exit by this script; arms
alternate for ``--rounds`` rounds and the medians are compared. CPU is user + system of the child.

* first ``hf:`` judgment: ``import scijudge``, ``make_lm("hf:<adapter>")``, one ``yescieval.qa.correctness``
  judgment (constrained JSON through the chain) on the tiny random Llama model + LoRA adapter built here,
  against the reference: import torch, transformers and peft, load the base model and the adapter, tokenize a
  chat prompt and ``generate`` the same number of tokens. Also printed: what ``import llguidance.torch`` costs
  once torch and transformers' generation code are loaded (the import the engine no longer makes; its
  module-level ``torch.compile`` pulls in ``torch._inductor``).
* ``scijudge --help`` against a bare ``import typer`` (the issue's reference) and against ``--help`` of a
  two-command Typer app ("Typer app": typer's own rich help renderer, the fair floor); ``scijudge COMMAND --help``
  (``judge`` by default, the command with the most options) against the same and the app's ``hello --help``.

    python benchmarks/bench_startup.py             # 3 rounds
    python benchmarks/bench_startup.py --rounds 1 --skip-hf
    python benchmarks/bench_startup.py --skip-hf --command calibrate
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

SCIJUDGE_FIRST = """
import os, sys
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
from scijudge import Item, Judge, get_spec, make_lm
lm = make_lm("hf:" + sys.argv[1], cache=False, max_tokens=int(sys.argv[2]))
judge = Judge(get_spec("yescieval.qa.correctness"), lm=lm)
item = Item(id="x", question="What limits battery life?",
            papers=[{"title": "Capacity fade", "abstract": "Cycling at high voltage cracks particles."}],
            answer="Particle cracking at high voltage [1].")
result = judge.judge_one(item)
assert result.status in ("ok", "abstained"), result
print("llguidance.torch imported:", "llguidance.torch" in sys.modules, "| torch._inductor imported:",
      "torch._inductor" in sys.modules, "| status:", result.status)
"""

REFERENCE_FIRST = """
import sys
import torch, transformers, peft
base, adapter, tokens = sys.argv[1], sys.argv[3], int(sys.argv[2])
tok = transformers.AutoTokenizer.from_pretrained(base)
model = transformers.AutoModelForCausalLM.from_pretrained(base)
model = peft.PeftModel.from_pretrained(model, adapter).eval()
messages = [{"role": "system", "content": "Rate the answer from 1 to 5 and explain why, as JSON."},
            {"role": "user", "content": "What limits battery life? Particle cracking at high voltage [1]."}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
with torch.inference_mode():
    out = model.generate(**ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
assert out.shape[1] > ids["input_ids"].shape[1]
print("torch._inductor imported:", "torch._inductor" in sys.modules)
"""

LLGUIDANCE_TORCH = """
import time, torch, transformers.generation, llguidance, llguidance.hf  # what the engine has loaded by then
t = time.perf_counter()
import llguidance.torch
print(f"{time.perf_counter() - t:.3f}")
"""

TYPER_APP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def hello(name: str = "x", count: int = 1) -> None:
    \"\"\"Say hello. Example: hello --name x\"\"\"
@app.command()
def bye() -> None:
    \"\"\"Say goodbye.\"\"\"
app()
"""


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args[:3]} failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.strip()


def _report(title: str, rows: dict[str, list[tuple[float, float]]], ours: str, reference: str) -> None:
    print(f"\n{title}")
    print(f"{'arm':>56} {'wall s (median)':>15} {'CPU s (median)':>14}")
    medians = {}
    for name, runs in rows.items():
        medians[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"{name:>56} {medians[name][0]:>15.2f} {medians[name][1]:>14.2f}")
    (w1, c1), (w0, c0) = medians[ours], medians[reference]
    print(f"{'ratio ' + ours + ' / ' + reference:>56} {w1 / w0:>15.2f} {c1 / c0:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=40, help="tokens the reference generates (the judge's cap)")
    parser.add_argument("--skip-hf", action="store_true", help="only the --help part (no torch needed)")
    parser.add_argument("--command", default="judge", help="the command whose --help is timed too")
    args = parser.parse_args()
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    py = sys.executable
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (the figures are wall-clock: read the ratios)")

    if not args.skip_hf:
        from scijudge.lm.tiny import build_tiny_model

        with tempfile.TemporaryDirectory() as tmp:
            paths = build_tiny_model(tmp, seed=0)
            base, adapter = str(paths["base"]), str(paths["adapter"])
            rows: dict[str, list[tuple[float, float]]] = {"scijudge first hf: judgment": [],
                                                         "torch+transformers+peft load+generate": []}
            note = ref_note = ""
            for _ in range(args.rounds):
                wall, cpu, note = _timed([py, "-c", SCIJUDGE_FIRST, adapter, str(args.tokens)], env)
                rows["scijudge first hf: judgment"].append((wall, cpu))
                wall, cpu, ref_note = _timed([py, "-c", REFERENCE_FIRST, base, str(args.tokens), adapter], env)
                rows["torch+transformers+peft load+generate"].append((wall, cpu))
            _report("time to the first hf: judgment (tiny random Llama + LoRA, CPU)", rows,
                    "scijudge first hf: judgment", "torch+transformers+peft load+generate")
            print(f"  scijudge process: {note.splitlines()[-1]}")
            print(f"  reference process: {ref_note.splitlines()[-1]} (transformers' masking_utils imports torch._dynamo"
                  " itself, in both arms)")
            costs = [float(_timed([py, "-c", LLGUIDANCE_TORCH], env)[2].splitlines()[-1]) for _ in range(args.rounds)]
            print(f"  `import llguidance.torch` after torch, transformers.generation and llguidance (what the engine "
                  "no longer imports): "
                  f"median {statistics.median(costs):.2f} s wall")

    ours_cmd = f"scijudge {args.command} --help"
    arms = {"scijudge --help": [py, "-m", "scijudge", "--help"],
            ours_cmd: [py, "-m", "scijudge", args.command, "--help"],
            "import typer": [py, "-c", "import typer"],
            "Typer app --help": [py, "-c", TYPER_APP, "--help"],
            "Typer app hello --help": [py, "-c", TYPER_APP, "hello", "--help"]}
    help_rows: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    for _ in range(args.rounds):
        for name, command in arms.items():
            help_rows[name].append(_timed(command, env)[:2])
    _report("scijudge --help and scijudge COMMAND --help", help_rows, "scijudge --help", "import typer")

    def ratio(ours: str, reference: str) -> None:
        (w1, c1), (w0, c0) = ((statistics.median(r[0] for r in help_rows[name]),
                               statistics.median(r[1] for r in help_rows[name])) for name in (ours, reference))
        print(f"{'ratio ' + ours + ' / ' + reference:>56} {w1 / w0:>15.2f} {c1 / c0:>14.2f}")

    ratio("scijudge --help", "Typer app --help")
    ratio(ours_cmd, "import typer")
    ratio(ours_cmd, "Typer app hello --help")


if __name__ == "__main__":
    main()
