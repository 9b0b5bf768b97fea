"""Judge with local ``hf:`` models on Ray actors: one local engine per GPU (or per CPU slot), many machines.

The driver never loads the model. It deals the items out in small chunks; each actor builds its judges
once (``JudgeRecipe.build``, i.e. ``make_lm("hf:…")`` as a user would), plans the chunk's pending
judgments with the runner's own planning and key, skipping the keys the run store already holds, and
judges them. Results stream back chunk by chunk and the driver alone writes the run store, so resume
and identity behave exactly as on one machine. Needs the optional ``ray`` extra.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from scijudge.lm._litellm_env import LOCAL_COST_MAP
from scijudge.data import Item
from scijudge.errors import ModelError
from scijudge.lm import is_local_model
from scijudge.run.threads import JudgeRecipe, Progress, RunSummary
from scijudge.run.store import Run

_ENV = ("PYTHONPATH", LOCAL_COST_MAP, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ModelError("--ray needs the 'ray' extra: pip install 'scijudge[ray]'") from exc
    return ray


def check_ray_recipes(recipes: Sequence[JudgeRecipe]) -> None:
    """Ray is for local models; API judges are served faster by --processes or --batch."""
    for recipe in recipes:
        if not is_local_model(recipe.model):
            raise ModelError(f"{recipe.model} is an API model: API judges do not need Ray (its actors run local hf: "
                             "engines); use --concurrency/--processes for speed or --batch for the batch price")


class _JudgeActor:
    """Builds the judges once and judges chunks of items; returns result dumps and planning counts."""

    def __init__(self, recipes: list[JudgeRecipe], done: set[str], concurrency: int, retry_abstained: bool) -> None:
        self.judges = [recipe.build() for recipe in recipes]
        self.done = done
        self.concurrency = concurrency

    def judge_chunk(self, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, int, str | None]:
        """(results, already done, not applicable, fatal error) for these items."""
        from concurrent.futures import ThreadPoolExecutor

        from scijudge.judges.base import judgment_key_for as task_key
        from scijudge.run.threads import plan

        loaded = [Item.model_validate(item) for item in items]
        missing: list[tuple[str, str]] = []
        tasks, _ = plan(loaded, self.judges, None, not_applicable=missing)
        todo = [task for task in tasks if task_key(*task) not in self.done]
        results: list[dict[str, Any]] = []
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
                for result in pool.map(lambda t: t[1].judge_item(t[0], t[2]), todo):
                    results.append(result.model_dump(mode="json"))
        except Exception as exc:
            return results, len(tasks) - len(todo), len(missing), f"{type(exc).__name__}: {exc}"
        return results, len(tasks) - len(todo), len(missing), None


def judge_items_ray(items: Sequence[Item], recipes: Sequence[JudgeRecipe], *, run: Run | None = None,
                    address: str | None = None, workers: int | None = None, concurrency: int = 8,
                    chunk_items: int = 4, retry_abstained: bool = False,
                    on_result: Progress | None = None) -> RunSummary:
    """Judge items with ``hf:`` judges on Ray actors; the driver writes every result to ``run`` as it arrives.

    Args:
        address: a Ray cluster address (``auto``, ``ray://host:10001``); None starts a local Ray on this machine.
        workers: actors to start (default: one per GPU in the cluster, or 1 without GPUs).
        concurrency: judgments in flight per actor (its local engine batches them).
        chunk_items: items per task sent to an actor (results stream back per chunk).
    """
    check_ray_recipes(recipes)
    ray = _require_ray()
    env = {name: os.environ[name] for name in _ENV if name in os.environ}
    started_here = not ray.is_initialized()
    if started_here:
        init: dict[str, Any] = {"runtime_env": {"env_vars": env}, "include_dashboard": False,
                                "log_to_driver": False, "configure_logging": False}
        if address:
            init["address"] = address
        else:
            init["num_cpus"] = max(workers or 1, 1)
        ray.init(**init)
    try:
        return _drive(ray, items, list(recipes), run, workers, concurrency, chunk_items, retry_abstained, on_result)
    finally:
        if started_here:
            ray.shutdown()


def _drive(ray: Any, items: Sequence[Item], recipes: list[JudgeRecipe], run: Run | None, workers: int | None,
           concurrency: int, chunk_items: int, retry_abstained: bool, on_result: Progress | None) -> RunSummary:
    """Start the actors, deal out chunks (a new one to each actor as it finishes) and store results."""
    from scijudge.judges.base import JudgeResult

    gpus = int(ray.cluster_resources().get("GPU", 0))
    count = workers or max(gpus, 1)
    options = {"num_gpus": 1} if gpus else {"num_cpus": 1}
    done = run.completed_keys(include_abstained=not retry_abstained) if run is not None else set()
    done_ref = ray.put(done)
    actor_class = ray.remote(**options)(_JudgeActor)
    actors = [actor_class.remote(recipes, done_ref, concurrency, retry_abstained) for _ in range(count)]
    chunks = [[item.model_dump(mode="json") for item in items[start:start + chunk_items]]
              for start in range(0, len(items), max(1, chunk_items))]
    summary = RunSummary()
    started = time.perf_counter()
    in_flight: dict[Any, Any] = {}
    queue = iter(chunks)
    for actor in actors:
        for _ in range(2):  # two chunks per actor keep its engine busy while the driver stores results
            chunk = next(queue, None)
            if chunk is not None:
                in_flight[actor.judge_chunk.remote(chunk)] = actor
    fatal: str | None = None
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        actor = in_flight.pop(ready[0])
        try:
            results, skipped, not_applicable, error = ray.get(ready[0])
        except Exception as exc:
            results, skipped, not_applicable, error = [], 0, 0, f"{type(exc).__name__}: {exc}"
        summary.skipped_done += skipped
        summary.not_applicable += not_applicable
        for data in results:
            result = JudgeResult.model_validate(data)
            if run is not None:
                run.record(result)
            summary.planned += 1
            summary.add(result)
            if on_result is not None:
                on_result(result, summary)
        fatal = fatal or error
        if fatal is None:
            chunk = next(queue, None)
            if chunk is not None:
                in_flight[actor.judge_chunk.remote(chunk)] = actor
    summary.seconds = time.perf_counter() - started
    if fatal is not None:
        raise ModelError(f"a Ray worker stopped: {fatal}")
    return summary
