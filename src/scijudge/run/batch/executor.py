"""Judge through provider batch APIs (about half the token price; results within the completion window).

Pending judgments (``scijudge.run.plan``) become batch lines whose ``custom_id`` is the judgment key,
with the body the chain would send for its first strategy (``StructuredChain.chat_body``). Result lines are
parsed and validated by the chain's own ``parse_answer`` and stored through ``Run.record``. Lines that
failed or did not validate go to the chain's next strategy in a follow-up batch (or, with
``fallback="direct"``, to direct calls through the whole chain); when every strategy failed the judgment
is an abstention with its reason, as in a direct call. Lines a batch left unanswered (expired, cancelled)
are sent again in a follow-up batch at the same strategy.

Every batch and its keys are recorded in the run store *before* it is created (``batch_store``): a re-run
after a kill polls the recorded batches first and submits nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scijudge.chain.chain import CallRecord, InvalidAnswer, parse_answer
from scijudge.data import Item
from scijudge.errors import ModelError
from scijudge.judges.base import Judge
from scijudge.lm import is_local_model
from scijudge.records import Attempt, JudgeResult, attempt_totals, model_name, safe_endpoint
from scijudge.run.batch.openai import OpenAIBatchAPI
from scijudge.run.batch.pricing import batch_rates
from scijudge.run.batch.store import FINAL_STATUSES, BatchRecord, BatchStore
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Task
from scijudge.spec.families import get_family

Fallback = Literal["next-strategy", "direct"]
_RESENDS = 2  # times a line left unanswered by an ended batch (expired, cancelled) is sent again


@dataclass
class _Pending:
    """One judgment travelling through batches: its task, the chain stage it is at, and its history."""

    item: Item
    judge: Judge
    part: str
    stage: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    last_problem: str = "no strategy was tried"
    resends: int = 0


@dataclass
class BatchReport:
    """Counts of what the batch path did in this invocation (for summaries and benchmarks)."""

    created: int = 0
    resumed: int = 0
    lines: int = 0
    direct_fallbacks: int = 0


def _stages(judge: Judge) -> list[tuple[str, float]]:
    """The chain's strategy sequence for this judge's model, each at its first temperature (one batch round
    per strategy): the same sequence a direct call goes through."""
    lm = judge.lm
    config = judge.chain.config
    anthropic = model_name(lm).startswith("anthropic/")  # no any-JSON mode there
    return [(strategy, config.temperatures[0]) for strategy in judge.chain.strategies_for(lm)
            if strategy == "json_schema" or not anthropic]


def task_key(item: Item, judge: Judge, part: str) -> str:
    """The run-store key of a batch line: the judgment's identity."""
    return judge.identity(item, part)[0].key


def check_batchable(judges: Sequence[Any]) -> None:
    """Refuse judges the batch path cannot serve, with the reason (before anything is sent or loaded)."""
    for judge in judges:
        if not isinstance(judge, Judge) or judge.variant_tags or judge.preset is not None:
            raise ModelError(f"judge {judge.name!r}: batch mode sends the judge's structured prompt as one line per "
                             "judgment; --fused, --layout and --preset judges run without --batch")
        if judge.mode != "generate":
            raise ModelError(f"judge {judge.name!r}: batch mode sends generated judgments; --mode decision reads "
                             "logprobs of direct calls (drop --batch)")
        lm = judge.lm
        model = model_name(lm)
        if not get_family(judge.spec.family).one_call:
            raise ModelError(f"judge {judge.name!r}: {judge.spec.family} judges make dependent calls per judgment; "
                             "batch mode serves one-call judges (likert, pairwise, materials)")
        if model.startswith("local/") or is_local_model(model) or lm is None:
            raise ModelError(f"judge {judge.name!r} uses {model}: batch mode is for provider APIs "
                             "(a local hf: model already batches in-process; use --ray for many GPUs)")
        if not model.startswith(("openai/", "anthropic/")):
            raise ModelError(f"batch mode speaks the OpenAI-compatible batch API (openai/<model>, or any server "
                             f"behind --api-base) and Anthropic message batches; {model} is not supported yet")


class _BatchClients:
    """One batch-API client per (provider, api_base, key) of the judges' LMs."""

    def __init__(self, completion_window: str) -> None:
        self._clients: dict[tuple[str, str | None, str | None], Any] = {}
        self.completion_window = completion_window

    def for_judge(self, judge: Judge) -> Any:
        lm = judge.lm
        kwargs = getattr(lm, "kwargs", {})
        provider = "anthropic" if lm.model.startswith("anthropic/") else "openai"
        index = (provider, kwargs.get("api_base"), kwargs.get("api_key"))
        if index not in self._clients:
            if provider == "anthropic":
                from scijudge.run.batch.anthropic import AnthropicBatchAPI

                self._clients[index] = AnthropicBatchAPI(index[1], index[2])
            else:
                self._clients[index] = OpenAIBatchAPI(index[1], index[2], completion_window=self.completion_window)
        return self._clients[index]

    def all(self) -> list[Any]:
        return list(self._clients.values())


@dataclass
class BatchExecutor:
    """Judge every pending (item, judge, part) through provider batch APIs.

    Args:
        batch_size: lines per batch (OpenAI allows up to 50,000 lines and 200 MB per file).
        poll: seconds between status checks of running batches.
        fallback: where lines that failed go: ``next-strategy`` (a follow-up batch) or ``direct`` calls.
        completion_window: the provider's completion window (OpenAI: ``24h``).
        on_batch: called whenever a batch is recorded or changes status (progress display).
        report: counts of batches created, resumed and lines sent (filled in as the run goes).
    """

    batch_size: int = 5000
    poll: float = 30.0
    fallback: Fallback = "next-strategy"
    completion_window: str = "24h"
    on_batch: Callable[[BatchRecord], None] | None = None
    report: BatchReport = field(default_factory=BatchReport)
    name: str = "batch"
    plans_locally: bool = True

    def check(self, judges: Sequence[Any]) -> None:
        if self.fallback not in ("next-strategy", "direct"):
            raise ModelError(f"--batch-fallback must be next-strategy or direct, not {self.fallback!r}")
        check_batchable(judges)

    def execute(self, tasks: list[Task], life: Lifecycle) -> int:
        if life.store is None:
            raise ModelError("batch mode needs a run store: batches are recorded there before they are created")
        run = life.store
        report = self.report
        pending = {task_key(item, judge, part): _Pending(item, judge, part)  # type: ignore[arg-type]
                   for item, judge, part in tasks}
        store = BatchStore(run.path)
        clients = _BatchClients(self.completion_window)
        try:
            waiting = _resume(store, pending, clients, report)
            polled = {key for record in waiting for key in record.keys}
            ready = [key for key in pending if key not in polled]
            while ready or waiting:
                waiting.extend(_submit(store, clients, pending, ready, self.batch_size, report, self.on_batch))
                ready = []
                for record, state in _poll_until_done(store, clients, waiting, self.poll, self.on_batch):
                    ready.extend(_process(_client_of(record, clients), record, state.lines, pending, self.fallback,
                                          life.record, report))
                    store.processed(record.client_id, state.status)
                waiting = []
                if self.fallback == "direct" and ready:
                    _direct(ready, pending, life.record, report)
                    ready = []
        finally:
            store.close()
        return 0


def _resume(store: BatchStore, pending: dict[str, _Pending], clients: _BatchClients,
            report: BatchReport) -> list[BatchRecord]:
    """Recorded batches still to poll whose keys are pending now; orphaned intents are found or dropped."""
    waiting = []
    for record in store.records(unprocessed=True):
        keys = [key for key in record.keys if key in pending]
        if not keys:
            continue
        client = clients.for_judge(pending[keys[0]].judge)
        if record.remote_id is None:
            found = client.find(record)
            if found is None:  # killed before the batch was created: its lines go out in a new batch
                store.processed(record.client_id, "never-created")
                continue
            store.submitted(record.client_id, found, "in_progress")
            record.remote_id = found
        for key in keys:
            pending[key].stage = record.stage
        report.resumed += 1
        waiting.append(record)
    return waiting


def _submit(store: BatchStore, clients: _BatchClients, pending: dict[str, _Pending], keys: list[str],
            batch_size: int, report: BatchReport, on_batch: Callable[[BatchRecord], None] | None) -> list[BatchRecord]:
    """Create batches for these keys, grouped by model and stage, recording each before creating it."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for key in keys:  # one batch file serves one model at one endpoint (an OpenAI rule), any number of judges
        entry = pending[key]
        lm = entry.judge.lm
        index = (lm.model, lm.kwargs.get("api_base"), lm.kwargs.get("api_key"), entry.stage)
        groups.setdefault(index, []).append(key)
    created = []
    for group in groups.values():
        for start in range(0, len(group), max(1, batch_size)):
            chunk = group[start:start + max(1, batch_size)]
            first = pending[chunk[0]]
            lm = first.judge.lm
            strategy, temperature = _stages(first.judge)[first.stage]
            api = clients.for_judge(first.judge)
            lines = [_line(api, key, pending[key]) for key in chunk]
            _, basis = batch_rates(lm.model)
            client_id = store.intend(provider=api.provider,
                                     endpoint=safe_endpoint(lm.kwargs.get("api_base")) or None, model=lm.model,
                                     stage=first.stage, strategy=strategy, temperature=temperature, keys=chunk,
                                     price_basis=basis)
            remote_id, status = api.submit(lines, client_id)
            store.submitted(client_id, remote_id, status)
            report.created += 1
            report.lines += len(lines)
            record = store.record(client_id)
            if on_batch is not None:
                on_batch(record)
            created.append(record)
    return created


def _line(api: Any, key: str, entry: _Pending) -> dict[str, Any]:
    """One batch line in the provider's format, with the request the chain sends at the entry's stage."""
    judge = entry.judge
    strategy, temperature = _stages(judge)[entry.stage]
    max_tokens = judge.lm.kwargs.get("max_tokens") or judge.chain.config.max_tokens
    return api.line(key, judge, judge.inputs_for(entry.item, entry.part), strategy=strategy,
                    temperature=temperature, max_tokens=max_tokens)


def _poll_until_done(store: BatchStore, clients: _BatchClients, waiting: list[BatchRecord], poll: float,
                     on_batch: Callable[[BatchRecord], None] | None) -> Any:
    """Yield (record, state) for each batch as it ends, polling every ``poll`` seconds."""
    open_batches = list(waiting)
    while open_batches:
        still = []
        for record in open_batches:
            client = _client_of(record, clients)
            state = client.poll(record.remote_id or "")
            if state.status != record.status:
                store.update(record.client_id, status=state.status, completed=state.completed, failed=state.failed)
                record.status = state.status
                if on_batch is not None:
                    on_batch(record)
            if state.status in FINAL_STATUSES:
                yield record, state
            else:
                still.append(record)
        open_batches = still
        if open_batches:
            time.sleep(poll)


def _client_of(record: BatchRecord, clients: _BatchClients) -> Any:
    """The client that created a recorded batch (matched by provider and public endpoint)."""
    for client in clients.all():
        if client.provider == record.provider and (safe_endpoint(client.api_base) or None) == record.endpoint:
            return client
    raise ModelError(f"batch {record.remote_id} was created at {record.endpoint or record.provider}; "
                     "re-run with that model and --api-base")


def _process(api: Any, record: BatchRecord, lines: dict[str, dict[str, Any]], pending: dict[str, _Pending],
             fallback: Fallback, finish: Callable[[JudgeResult], None], report: BatchReport) -> list[str]:
    """Turn an ended batch's lines into judgments; returns the keys that need another round."""
    again = []
    for key in record.keys:
        entry = pending.get(key)
        if entry is None:
            continue
        result = _judge_line(api, record, lines.get(key), entry)
        if result is not None:
            finish(result)
            del pending[key]
        elif entry.stage >= len(_stages(entry.judge)) and fallback != "direct":
            finish(_abstention(entry))
            del pending[key]
        else:
            again.append(key)
    return again


def _judge_line(api: Any, record: BatchRecord, line: dict[str, Any] | None, entry: _Pending) -> JudgeResult | None:
    """A judgment from one result line, or None after moving the entry to its next stage (or resending it)."""
    from dspy import Prediction

    status, response, error = api.outcome(line)
    strategy, temperature = record.strategy, record.temperature
    if status is None:  # the batch ended without answering this line
        entry.resends += 1
        if entry.resends > _RESENDS:
            raise ModelError(f"batch {record.remote_id} ended {record.status} and this judgment was sent "
                             f"{_RESENDS + 1} times without an answer; re-run to try again")
        return None
    if response is None:
        from scijudge.chain.faults import names_the_format

        refused_format = status in (400, 422) and names_the_format(Exception(error or ""))
        outcome = "format_rejected" if refused_format else "request_rejected" if status in (400, 422) else (
            "rate_limited" if status == 429 else "server_error" if status >= 500 else "provider_error")
        entry.attempts.append(Attempt(strategy=strategy, temperature=temperature, outcome=outcome,
                                      status=status, error=error))
        entry.last_problem = (f"the provider rejected response_format={strategy}" if refused_format
                              else f"{outcome}: {error}")
        # A request refused for its content (not its format) fails the same way at every stage: abstain it now.
        entry.stage = len(_stages(entry.judge)) if outcome == "request_rejected" else entry.stage + 1
        return None
    rates, _ = batch_rates(record.model)
    usage = response.usage
    cost = (usage.input_tokens * rates[0] + usage.output_tokens * rates[1]
            if rates and usage.input_tokens is not None and usage.output_tokens is not None else None)
    attempt = Attempt(strategy=strategy, temperature=temperature, outcome="ok", tokens_in=usage.input_tokens,
                      tokens_out=usage.output_tokens, cost=cost)
    entry.attempts.append(attempt)
    text = response.text or ""
    try:
        value, recovered = parse_answer(text, entry.judge.signature)
    except InvalidAnswer as exc:
        attempt.outcome = "truncated" if response.finish_reason == "length" else exc.outcome
        attempt.error = str(exc)[:500]
        entry.last_problem = f"{exc.outcome}: {str(exc)[:300]}"
        entry.stage += 1
        return None
    attempt.outcome = "recovered_wrapper" if recovered else "ok"
    call = CallRecord(attempts=entry.attempts, text=text)
    if response.logprobs:
        from scijudge.chain.cache import logprobs_as_dicts

        call.logprobs = logprobs_as_dicts(response.logprobs)
    prediction = Prediction(judgment=value, abstained=False, reason=None, attempts=entry.attempts)
    return entry.judge.build_result(entry.item.id, entry.part, prediction, call, 0.0,
                                    entry.judge.identity(entry.item, entry.part)[0].input_hash)


def _abstention(entry: _Pending) -> JudgeResult:
    """Every strategy failed in batches: the same abstention a direct call records."""
    from dspy import Prediction

    reason = f"all strategies failed; last problem: {entry.last_problem}"
    prediction = Prediction(judgment=None, abstained=True, reason=reason, attempts=entry.attempts)
    return entry.judge.build_result(entry.item.id, entry.part, prediction, CallRecord(attempts=entry.attempts), 0.0,
                                    entry.judge.identity(entry.item, entry.part)[0].input_hash)


def _direct(keys: list[str], pending: dict[str, _Pending], finish: Callable[[JudgeResult], None],
            report: BatchReport, concurrency: int = 8) -> None:
    """``--batch-fallback direct``: judge the lines that failed in a batch with direct calls (the whole chain)."""
    from concurrent.futures import ThreadPoolExecutor

    entries = [pending.pop(key) for key in keys]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = pool.map(lambda e: e.judge.judge_one(e.item, e.part), entries)
        for entry, result in zip(entries, results):
            attempts = [*entry.attempts, *result.attempts]
            finish(result.model_copy(update={"attempts": attempts, **attempt_totals(attempts)}))
            report.direct_fallbacks += 1
