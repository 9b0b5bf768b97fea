"""Judge through provider batch APIs (about half the token price; results within the completion window).

Pending judgments (``scijudge.run.plan``) become batch lines whose ``custom_id`` is the judgment key,
with the body the chain would send at the judgment's stage (``StructuredChain.chat_body``). Every result line
goes through the run's lifecycle (``Lifecycle.record``/``no_answer``/``fail``) after
``scijudge.run.batch.results`` decided what it means with the chain's fault classes: a judgment, another round
at the chain's next strategy (a follow-up batch, or direct calls with ``fallback="direct"``), a resend at the
same strategy (expired, cancelled, unreadable lines), an abstention with its reason, or no answer.

Nothing paid for is lost or paid twice: every batch and its keys are recorded in the run store *before* it is
created (``batch_store``), a re-run collects recorded batches before submitting anything, an unrecorded
batch is looked up before it is created again, every attempt of a judgment is kept between rounds, and the
answers of a collected batch that this run did not ask for are kept for the run that does. A stop request
(Ctrl-C) stops submitting and polling at once; the recorded batches complete at the provider and are
collected on resume.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scijudge.data import Item
from scijudge.errors import ModelError, ScijudgeError, TransportFailure
from scijudge.judges.base import Judge
from scijudge.lm import is_local_model
from scijudge.records import Attempt, attempt_totals, model_name, safe_endpoint
from scijudge.run.batch.openai import BatchFault, OpenAIBatchAPI, ResultsUnavailable
from scijudge.run.batch.pricing import batch_rates
from scijudge.run.batch.results import RESENDS, Pending, Verdict, abstention, read_line, stages
from scijudge.run.batch.store import FINAL_STATUSES, LOOKUP_FAILED, BatchRecord, BatchStore, Progress
from scijudge.run.lifecycle import Lifecycle
from scijudge.run.plan import Task
from scijudge.spec.families import get_family

Fallback = Literal["next-strategy", "direct"]
_Pending = Pending  # the older name (tests build lines with it)
_stages = stages


@dataclass
class BatchReport:
    """Counts of what the batch path did in this invocation (for summaries and benchmarks)."""

    created: int = 0
    resumed: int = 0
    lines: int = 0
    direct_fallbacks: int = 0
    kept: int = 0
    used_kept: int = 0
    bad_lines: int = 0
    repeats: int = 0


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
        on_note: called with one line for each thing the user should know (an unreadable result line, a
            batch left running on a stop request); the lines also go to the summary's ``notes``.
        report: counts of batches created, resumed and lines sent (filled in as the run goes).
    """

    batch_size: int = 5000
    poll: float = 30.0
    fallback: Fallback = "next-strategy"
    completion_window: str = "24h"
    on_batch: Callable[[BatchRecord], None] | None = None
    on_note: Callable[[str], None] | None = None
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
        pending = {task_key(item, judge, part): Pending(item, judge, part)  # type: ignore[arg-type]
                   for item, judge, part in tasks}
        store = BatchStore(life.store.path)
        session = _Session(self, life, store, pending, Path(life.store.path))
        try:
            session.run()
        except ScijudgeError as exc:  # a batch provider fault, or a client that cannot be built
            life.fail(exc)
        finally:
            in_open = session.tell_what_is_left()
            store.close()
        if life.closed:  # lines at the provider are in flight; the rest were never sent
            life.never_sent(len(pending) - in_open)
            return in_open
        return len(pending)


class _Session:
    """One invocation's batch work: resume, submit, poll, process; state shared by the steps."""

    def __init__(self, options: BatchExecutor, life: Lifecycle, store: BatchStore, pending: dict[str, Pending],
                 run_path: Path) -> None:
        self.o = options
        self.life = life
        self.store = store
        self.pending = pending
        self.run_path = run_path
        self.clients = _BatchClients(options.completion_window)
        self.report = options.report
        self.open: list[BatchRecord] = []
        self.done: set[str] = set()

    # --- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        self.done = self.life.done_keys(retry_abstained=False)
        self._load_progress()
        waiting = self._resume()
        polled = {key for record in waiting for key in record.keys}
        ready = self._use_kept([key for key in self.pending if key not in polled])
        while (ready or waiting) and not self.life.closed:
            waiting.extend(self._submit(self._past_the_last_stage(ready)))
            again: list[str] = []
            for record, state in self._poll(waiting):
                again.extend(self._process(record, state))
            waiting = []
            if self.o.fallback == "direct" and again:
                self._direct(again)
                again = []
            ready = again

    def _past_the_last_stage(self, keys: list[str]) -> list[str]:
        """Judgments that went through every strategy before a kill (or from a kept answer): direct calls with
        ``fallback="direct"``, else the abstention a direct call records. Returns the keys still to send."""
        spent = [key for key in keys if self.pending[key].stage >= len(stages(self.pending[key].judge))]
        if spent and self.o.fallback == "direct":
            self._direct(spent)
        else:
            for key in spent:
                self.life.record(abstention(self.pending.pop(key)))
                self.store.forget_progress(key)
        return [key for key in keys if key not in spent]

    def note(self, text: str) -> None:
        self.life.summary.notes.append(text)
        if self.o.on_note is not None:
            self.o.on_note(text)

    def _lookup_failed(self, record: BatchRecord, exc: BatchFault) -> BatchFault:
        """A batch whose creation was never confirmed could not be looked up. The first time: re-run (the look-up
        may work then). Again: the way out is to give it up, which cannot stop a batch the provider did create."""
        if record.status != LOOKUP_FAILED:
            self.store.update(record.client_id, status=LOOKUP_FAILED)
            return BatchFault(f"{exc}; whether batch {record.client_id} was created is not known yet: re-run to look "
                              "it up again")
        return BatchFault(f"{exc} (the second look-up in a row); {self.abandon_hint(record.client_id)} (if the "
                          "provider did create it, it may still run and bill it)")

    def abandon_hint(self, batch_id: str) -> str:
        return (f"re-run to try again, or give the batch up (its lines go back to pending): "
                f"scijudge batches {self.run_path} --abandon {batch_id}")

    def tell_what_is_left(self) -> int:
        """On a stop or a fault: what is still pending, and where; returns how many pending judgments have a
        line in a batch still open at the provider."""
        if not self.pending or not self.life.closed:
            return 0
        in_open = 0
        for record in self.open:
            keys = [key for key in record.keys if key in self.pending]
            in_open += len(keys)
            self.note(f"batch {record.remote_id or record.client_id}: {len(keys)} lines still pending at the "
                      "provider; it stays recorded in the run store and is collected on resume")
        if len(self.pending) > in_open:
            self.note(f"{len(self.pending) - in_open} judgments were not sent yet; a re-run sends them")
        return in_open

    # --- state kept across kills --------------------------------------------------------------------
    def _load_progress(self) -> None:
        for key, saved in self.store.progress(list(self.pending)).items():
            entry = self.pending[key]
            entry.stage, entry.last_problem = saved.stage, saved.last_problem
            entry.resends, entry.after = saved.resends, saved.after
            entry.attempts = [Attempt.model_validate(a) for a in saved.attempts]

    def _save_progress(self, key: str, entry: Pending) -> None:
        self.store.save_progress(key, Progress(
            stage=entry.stage, attempts=[a.model_dump(mode="json") for a in entry.attempts],
            last_problem=entry.last_problem, resends=entry.resends, after=entry.after))

    def _resume(self) -> list[BatchRecord]:
        """Recorded batches still to collect that hold keys pending now; orphaned intents found or dropped.
        A batch none of whose keys this run asks for stays recorded for a run that does."""
        waiting = []
        for record in self.store.records(unprocessed=True):
            keys = [key for key in record.keys if key in self.pending]
            if not keys:
                continue
            client = self.clients.for_judge(self.pending[keys[0]].judge)
            if record.remote_id is None:
                try:
                    found = client.find(record, self.store.remote_ids())
                except BatchFault as exc:
                    raise self._lookup_failed(record, exc) from exc
                if found is None:  # killed before the batch was created: its lines go out in a new batch
                    self.store.processed(record.client_id, "never-created")
                    continue
                self.store.submitted(record.client_id, *found)
                record.remote_id, record.status = found
            for key in keys:
                if self.pending[key].after != record.client_id:
                    self.pending[key].stage = record.stage
            self.report.resumed += 1
            waiting.append(record)
        return waiting

    def _use_kept(self, keys: list[str]) -> list[str]:
        """Judgments whose answer an earlier run collected but did not ask for: made from the kept line, with no
        new request. Returns the keys still to send."""
        kept = self.store.kept_answers(keys)
        rest = []
        for key in keys:
            if key not in kept:
                rest.append(key)
                continue
            client_id, line = kept[key]
            record = self.store.record(client_id)
            entry = self.pending[key]
            entry.stage = record.stage
            self.report.used_kept += 1
            rest.extend(self._handle(self.clients.for_judge(entry.judge), record, key, line, entry))
            self.store.drop_answer(key)
        return rest

    # --- submitting -----------------------------------------------------------------------------------
    def _submit(self, keys: list[str]) -> list[BatchRecord]:
        """Create batches for these keys, grouped by model and stage, recording each before creating it; stops
        at once when the run is stopped."""
        groups: dict[tuple[Any, ...], list[str]] = {}
        for key in keys:  # one batch file serves one model at one endpoint (an OpenAI rule), any number of judges
            entry = self.pending[key]
            lm = entry.judge.lm
            index = (lm.model, lm.kwargs.get("api_base"), lm.kwargs.get("api_key"), entry.stage)
            groups.setdefault(index, []).append(key)
        created: list[BatchRecord] = []
        size = max(1, self.o.batch_size)
        for group in groups.values():
            for start in range(0, len(group), size):
                if self.life.closed:
                    return created
                chunk = group[start:start + size]
                first = self.pending[chunk[0]]
                lm = first.judge.lm
                strategy, temperature = stages(first.judge)[first.stage]
                api = self.clients.for_judge(first.judge)
                lines = [_line(api, key, self.pending[key]) for key in chunk]
                _, basis = batch_rates(lm.model)
                client_id = self.store.intend(provider=api.provider,
                                              endpoint=safe_endpoint(lm.kwargs.get("api_base")) or None,
                                              model=lm.model, stage=first.stage, strategy=strategy,
                                              temperature=temperature, keys=chunk, price_basis=basis)
                remote_id, status = api.submit(lines, client_id, self.store.remote_ids())
                self.store.submitted(client_id, remote_id, status)
                self.report.created += 1
                self.report.lines += len(lines)
                record = self.store.record(client_id)
                if self.o.on_batch is not None:
                    self.o.on_batch(record)
                created.append(record)
        return created

    # --- polling ----------------------------------------------------------------------------------------
    def _poll(self, waiting: list[BatchRecord]) -> Any:
        """Yield (record, state) for each batch as it ends, polling every ``poll`` seconds; returns as soon as the
        run is stopped (the batches left running stay recorded)."""
        self.open = list(waiting)
        while self.open and not self.life.closed:
            for record in list(self.open):
                if self.life.closed:
                    return
                client = _client_of(record, self.clients)
                try:
                    state = client.poll(record.remote_id or "")
                except ResultsUnavailable as exc:
                    self.open.remove(record)
                    self._unavailable(record, str(exc))
                    continue
                except BatchFault as exc:
                    raise BatchFault(f"{exc}; {self.abandon_hint(record.remote_id or record.client_id)}") from exc
                if state.status != record.status:
                    self.store.update(record.client_id, status=state.status, completed=state.completed,
                                      failed=state.failed)
                    record.status = state.status
                    if self.o.on_batch is not None:
                        self.o.on_batch(record)
                if state.status in FINAL_STATUSES:
                    self.open.remove(record)
                    yield record, state
            if self.open:
                self._sleep(self.o.poll)

    def _sleep(self, seconds: float) -> None:
        """Wait between polls, waking at once on a stop request or a run-level fault."""
        deadline = time.monotonic() + seconds
        while not self.life.closed and (left := deadline - time.monotonic()) > 0:
            self.life.gate.stop.wait(min(left, 0.25))

    def _unavailable(self, record: BatchRecord, why: str) -> None:
        """An ended batch whose results could not be downloaded: it stays recorded (a re-run collects it); its
        judgments got no answer in this run."""
        self.note(f"{why}; the batch stays recorded and a re-run collects it")
        for key in record.keys:
            if key in self.pending and self.pending[key].after != record.client_id:
                del self.pending[key]
                self.life.no_answer(f"the results of batch {record.remote_id} could not be downloaded")

    # --- processing ---------------------------------------------------------------------------------------
    def _process(self, record: BatchRecord, state: Any) -> list[str]:
        """Turn an ended batch's lines into judgments; returns the keys that need another round. Lines for keys
        this run did not ask for are kept in the store for the run that does."""
        api = _client_of(record, self.clients)
        for problem in state.problems:
            self.report.bad_lines += 1
            self.note(problem)
        for repeat in state.notes:
            self.report.repeats += 1
            self.note(repeat)
        again: list[str] = []
        kept: dict[str, dict[str, Any]] = {}
        refused = 0
        missing = [0, 0]  # judgments with no usable line in this batch: [not sent again, sent again]
        for key in record.keys:
            line = state.lines.get(key)
            entry = self.pending.get(key)
            if entry is None:
                if line is not None and key not in self.done:
                    kept[key] = line
                continue
            if entry.after == record.client_id:
                again.append(key)  # processed before a kill: its next round was not sent yet
                continue
            if line is None and state.status == "failed":
                refused += 1  # the provider failed the whole batch: sending the same lines again fails again
                continue
            sent = self._handle(api, record, key, line, entry)
            again.extend(sent)
            if line is None:
                missing[bool(sent)] += 1
        if state.problems:
            self._say_unread(missing)
        if kept:
            self.store.keep_answers(record.client_id, kept)
            self.report.kept += len(kept)
        self.store.processed(record.client_id, state.status)
        if refused:
            self.life.fail(BatchFault(
                f"batch {record.remote_id} failed at the provider: {state.reason or 'no reason given'}; its "
                f"{refused} lines were not run and are not sent again in this run; fix the cause, then re-run "
                "(they go out in a new batch)"))
        return again

    def _say_unread(self, missing: list[int]) -> None:
        """After unreadable result lines: what happens to the judgments that got no usable line, as it happens."""
        last, again = missing

        def judgments(n: int) -> str:
            return f"{n} judgment{'' if n == 1 else 's'} without a readable result line {'is' if n == 1 else 'are'}"

        if again:
            self.note(f"{judgments(again)} sent again")
        if last:
            self.note(f"{judgments(last)} not sent again in this run: no answer after {RESENDS + 1} batches (a "
                      "re-run tries again)")

    def _handle(self, api: Any, record: BatchRecord, key: str, line: dict[str, Any] | None,
                entry: Pending) -> list[str]:
        """One line through the lifecycle; returns [key] when the judgment needs another round."""
        verdict: Verdict = read_line(api, record, line, entry)
        entry.after = record.client_id
        if verdict.kind == "again" and entry.stage >= len(stages(entry.judge)) and self.o.fallback != "direct":
            verdict = Verdict("abstain", abstention(entry))
        if verdict.kind in ("result", "abstain"):
            assert verdict.result is not None
            self.life.record(verdict.result)
            del self.pending[key]
            self.done.add(key)
            self.store.forget_progress(key)
            return []
        if verdict.kind == "no_answer":
            entry.resends = 0  # a re-run sends it again with a fresh allowance
        self._save_progress(key, entry)  # every attempt so far (cost included) outlives a kill
        if verdict.kind == "no_answer":
            del self.pending[key]
            self.life.no_answer(verdict.reason)
            return []
        if verdict.kind == "fault":
            assert verdict.error is not None
            self.life.fail(verdict.error)
            return []
        return [key]

    def _direct(self, keys: list[str]) -> None:
        """``--batch-fallback direct``: the lines that failed in a batch, judged by direct calls (the whole chain,
        through the lifecycle's gate)."""
        from concurrent.futures import ThreadPoolExecutor

        def one(entry: Pending) -> Any:
            try:
                return self.life.judge(entry.judge, entry.item, entry.part)
            except Exception as exc:  # TransportFailure: no answer; anything else already closed the gate
                return exc

        entries = [(key, self.pending[key]) for key in keys]
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="scijudge-batch-direct") as pool:
            outcomes = list(pool.map(one, [entry for _, entry in entries]))
        for (key, entry), outcome in zip(entries, outcomes):
            if outcome is None or (isinstance(outcome, Exception) and not isinstance(outcome, TransportFailure)):
                continue  # stopped, or a run-level fault: still pending
            del self.pending[key]
            if isinstance(outcome, TransportFailure):
                self.life.no_answer(str(outcome))
                continue
            for result in outcome:
                attempts = [*entry.attempts, *result.attempts]
                self.life.record(result.model_copy(update={"attempts": attempts, **attempt_totals(attempts)}))
                self.report.direct_fallbacks += 1
            self.store.forget_progress(key)


def _line(api: Any, key: str, entry: Pending) -> dict[str, Any]:
    """One batch line in the provider's format, with the request the chain sends at the entry's stage."""
    judge = entry.judge
    strategy, temperature = stages(judge)[entry.stage]
    max_tokens = judge.lm.kwargs.get("max_tokens") or judge.chain.config.max_tokens
    line: dict[str, Any] = api.line(key, judge, judge.inputs_for(entry.item, entry.part), strategy=strategy,
                                    temperature=temperature, max_tokens=max_tokens)
    return line


def _client_of(record: BatchRecord, clients: _BatchClients) -> Any:
    """The client that created a recorded batch (matched by provider and public endpoint)."""
    for client in clients.all():
        if client.provider == record.provider and (safe_endpoint(client.api_base) or None) == record.endpoint:
            return client
    raise ModelError(f"batch {record.remote_id} was created at {record.endpoint or record.provider}; "
                     "re-run with that model and --api-base")
