"""Judge with local ``hf:`` models on Ray actors: one local engine per GPU (or per CPU slot), many machines.

The driver never loads the model. It deals the items out in small chunks; each actor builds its judges
once (``JudgeRecipe.build``, i.e. ``make_lm("hf:…")`` as a user would), plans the chunk's pending
judgments with the runner's own planning and key, skipping the keys the run store already holds, and
judges them. Results stream back chunk by chunk and the driver alone writes the run store, so resume
and identity behave exactly as on one machine. Needs the optional ``ray`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scijudge.lm.dspy_compat import LOCAL_COST_MAP
from scijudge.data import Item
from scijudge.errors import ModelError
from scijudge.lm import is_local_model
from scijudge.judges.recipe import JudgeRecipe, recipe_of
from scijudge.run.lifecycle import Lifecycle

_ENV = ("PYTHONPATH", LOCAL_COST_MAP, "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")


def _require_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ModelError("--ray needs the 'ray' extra: pip install 'scijudge[ray]'") from exc
    return ray


def check_ray_recipes(recipes: Sequence[Any]) -> None:
    """Ray is for local models; API judges are served faster by --processes or --batch."""
    for recipe in (recipe_of(r) for r in recipes):
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

        from scijudge.run.plan import plan_run

        loaded = [Item.model_validate(item) for item in items]
        found = plan_run(loaded, self.judges, None)
        todo = [task for task in found.tasks
                if not all(one.key in self.done for one in task[1].identity(task[0], task[2]))]
        results: list[dict[str, Any]] = []
        missing = len(found.not_applicable)
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
                for made in pool.map(lambda t: t[1].judge_item(t[0], t[2]), todo):
                    results.extend(one.model_dump(mode="json") for one in made)
        except Exception as exc:
            return results, len(found.tasks) - len(todo), missing, f"{type(exc).__name__}: {exc}"
        return results, len(found.tasks) - len(todo), missing, None


@dataclass
class RayExecutor:
    """Judge with local ``hf:`` judges on Ray actors (one engine per GPU); the driver stores every result.

    The driver never loads the model: judges travel as recipes and each actor plans its chunk of items
    against the keys the store already holds.

    Args:
        address: a Ray cluster address (``auto``, ``ray://host:10001``); None starts a local Ray on this machine.
        workers: actors to start (default: one per GPU in the cluster, or 1 without GPUs).
        concurrency: judgments in flight per actor (its local engine batches them).
        chunk_items: items per task sent to an actor (results stream back per chunk).
    """

    address: str | None = None
    workers: int | None = None
    concurrency: int = 8
    chunk_items: int = 4
    name: str = "ray"
    plans_locally: bool = False

    def check(self, judges: Sequence[Any]) -> None:
        check_ray_recipes(judges)

    def execute_remote(self, items: Sequence[Item], recipes: Sequence[Any], life: Lifecycle, *,
                       retry_abstained: bool) -> int:
        """Deal the items to actors; returns 0 (every dealt chunk is waited for; undealt items are noted)."""
        ray = _require_ray()
        env = {name: os.environ[name] for name in _ENV if name in os.environ}
        started_here = not ray.is_initialized()
        if started_here:
            init: dict[str, Any] = {"runtime_env": {"env_vars": env}, "include_dashboard": False,
                                    "log_to_driver": False, "configure_logging": False}
            if self.address:
                init["address"] = self.address
            else:
                init["num_cpus"] = max(self.workers or 1, 1)
            ray.init(**init)
        try:
            return _drive(ray, items, [recipe_of(r) for r in recipes], life, self.workers, self.concurrency,
                          self.chunk_items, retry_abstained)
        finally:
            if started_here:
                ray.shutdown()


def _drive(ray: Any, items: Sequence[Item], recipes: list[JudgeRecipe], life: Lifecycle, workers: int | None,
           concurrency: int, chunk_items: int, retry_abstained: bool) -> int:
    """Start the actors, deal out chunks (a new one to each actor as it finishes) and store results."""
    gpus = int(ray.cluster_resources().get("GPU", 0))
    count = workers or max(gpus, 1)
    options = {"num_gpus": 1} if gpus else {"num_cpus": 1}
    done_ref = ray.put(life.done_keys(retry_abstained=retry_abstained))
    actor_class = ray.remote(**options)(_JudgeActor)
    actors = [actor_class.remote(recipes, done_ref, concurrency, retry_abstained) for _ in range(count)]
    chunks = [[item.model_dump(mode="json") for item in items[start:start + chunk_items]]
              for start in range(0, len(items), max(1, chunk_items))]
    summary = life.summary
    in_flight: dict[Any, Any] = {}
    queue = iter(chunks)
    dealt = 0
    for actor in actors:
        for _ in range(2):  # two chunks per actor keep its engine busy while the driver stores results
            chunk = next(queue, None)
            if chunk is not None:
                in_flight[actor.judge_chunk.remote(chunk)] = actor
                dealt += 1
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
            summary.planned += 1
            life.record_dump(data)
        if error is not None:
            life.fail(ModelError(f"a Ray worker stopped: {error}"))
        if not life.closed:
            chunk = next(queue, None)
            if chunk is not None:
                in_flight[actor.judge_chunk.remote(chunk)] = actor
                dealt += 1
    if life.closed and dealt < len(chunks):  # every dealt chunk came back; the rest were never sent
        undealt = sum(len(chunk) for chunk in chunks[dealt:])
        summary.notes.append(f"{undealt} items were not dealt to a Ray worker yet (nothing sent for them); a "
                             "re-run judges them")
    return 0
