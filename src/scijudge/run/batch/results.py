"""What one batch result line means for its judgment, decided by the chain's fault classes as for a direct call.

A line is one of: a judgment (the answer validated by the chain's ``parse_answer``); another round at the
chain's next strategy (the format was refused, the answer did not parse or validate); a resend at the same
strategy (never answered: expired, cancelled, unreadable, or a transport fault such as a 5xx); an abstention
(the provider refused the item, the context overflowed, or every strategy failed); no answer (sent too many
times without one: counted, never stored, a re-run retries it); or a run-level fault (auth, billing, model
not found), which stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from scijudge.chain import faults
from scijudge.chain.chain import CallRecord, InvalidAnswer, parse_answer
from scijudge.data import Item
from scijudge.errors import EndpointError
from scijudge.judges.base import Judge
from scijudge.lm.dspy_compat import lm_errors
from scijudge.records import Attempt, JudgeResult, model_name, reply_text
from scijudge.run.batch.pricing import batch_rates

RESENDS = 2
"""Times a line that got no answer (expired, cancelled, unreadable, 5xx) is sent again before it counts as no
answer for this run."""


@dataclass
class Pending:
    """One judgment travelling through batches: its task, the chain stage it is at, and its history."""

    item: Item
    judge: Judge
    part: str
    stage: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    last_problem: str = "no strategy was tried"
    resends: int = 0
    after: str = ""  # the client id of the batch whose line was processed last for this judgment


@dataclass
class Verdict:
    """What came of one line: ``result`` (store it), ``again`` (another round; ``entry.stage`` says which),
    ``abstain`` (store the abstention ``result``), ``no_answer`` (``reason``) or ``fault`` (``error``)."""

    kind: Literal["result", "again", "abstain", "no_answer", "fault"]
    result: JudgeResult | None = None
    reason: str = ""
    error: EndpointError | None = None


def stages(judge: Judge) -> list[tuple[str, float]]:
    """The chain's strategy sequence for this judge's model, each at its first temperature (one batch round
    per strategy): the same sequence a direct call goes through."""
    lm = judge.lm
    config = judge.chain.config
    anthropic = model_name(lm).startswith("anthropic/")  # no any-JSON mode there
    return [(strategy, config.temperatures[0]) for strategy in judge.chain.strategies_for(lm)
            if strategy == "json_schema" or not anthropic]


def status_error(status: int, message: str) -> Exception:
    """The DSPy LM error a direct call gets for this HTTP status (lm15's status mapping), so that the chain's
    ``faults.classify`` decides a batch line exactly as it decides a direct answer."""
    errors = lm_errors()
    cls: type[Exception]
    if status in (401, 403):
        cls = errors.LMAuthError
    elif status == 402:
        cls = errors.LMBillingError
    elif status in (408, 504):
        cls = errors.LMTimeoutError
    elif status == 429:
        cls = errors.LMRateLimitError
    elif status in (400, 404, 409, 413, 422):
        cls = errors.LMInvalidRequestError
    elif 500 <= status <= 599:
        cls = errors.LMServerError
    else:
        cls = errors.LMProviderError
    return cls(message, status=status)  # type: ignore[call-arg]


def read_line(api: Any, record: Any, line: dict[str, Any] | None, entry: Pending) -> Verdict:
    """The verdict on one result line of ``record`` (a ``BatchRecord``) for ``entry``; updates the entry's
    stage, attempts and resend count."""
    try:
        status, response, error = api.outcome(line)
    except Exception as exc:  # a line the client's own parser cannot read: like an unreadable line
        status, response, error = None, None, f"unreadable result: {faults.short(exc)}"
    strategy, temperature = record.strategy, record.temperature
    if status is None:
        return _resend(entry, error or "no result for this line")
    if response is None:
        return _failed(entry, record, status, error or "the line failed")
    rates, _ = batch_rates(record.model)
    usage = response.usage
    cost = (usage.input_tokens * rates[0] + usage.output_tokens * rates[1]
            if rates and usage.input_tokens is not None and usage.output_tokens is not None else None)
    attempt = Attempt(strategy=strategy, temperature=temperature, outcome="ok", tokens_in=usage.input_tokens,
                      tokens_out=usage.output_tokens, cost=cost, reply=reply_text(response.text))
    entry.attempts.append(attempt)
    text = response.text or ""
    try:
        value, recovered = parse_answer(text, entry.judge.signature)
    except InvalidAnswer as exc:
        attempt.outcome = "truncated" if response.finish_reason == "length" else exc.outcome
        attempt.error = str(exc)[:500]
        entry.last_problem = f"{exc.outcome}: {str(exc)[:300]}"
        entry.stage += 1
        return Verdict("again")
    attempt.outcome = "recovered_wrapper" if recovered else "ok"
    call = CallRecord(attempts=entry.attempts, text=text)
    if response.logprobs:
        from scijudge.chain.cache import logprobs_as_dicts

        call.logprobs = logprobs_as_dicts(response.logprobs)
    from dspy import Prediction

    prediction = Prediction(judgment=value, abstained=False, reason=None, attempts=entry.attempts)
    return Verdict("result", entry.judge.build_result(entry.item.id, entry.part, prediction, call, 0.0,
                                                      entry.judge.identity(entry.item, entry.part)[0].input_hash))


def _resend(entry: Pending, why: str) -> Verdict:
    entry.resends += 1
    if entry.resends > RESENDS:
        return Verdict("no_answer", reason=f"sent {RESENDS + 1} times in batches without an answer (last: {why})")
    return Verdict("again")


def _failed(entry: Pending, record: Any, status: int, error: str) -> Verdict:
    """A line the provider answered with an error status: the chain's fault class decides."""
    exc = status_error(status, error)
    fault, outcome = faults.classify(exc)
    entry.attempts.append(Attempt(strategy=record.strategy, temperature=record.temperature,
                                  outcome=outcome, status=status, error=error,
                                  error_class=type(exc).__name__))
    last = entry.stage >= len(stages(entry.judge)) - 1
    where = f"{record.model} (batch {record.remote_id})"
    if fault == "not_found" and record.strategy == "json_schema" and not last:
        fault = "format"
    if fault in ("run", "not_found"):
        return Verdict("fault", error=EndpointError(f"{where}: HTTP {status}: {error}"))
    if fault == "format":
        entry.last_problem = f"the provider rejected response_format={record.strategy}"
        entry.stage += 1
        return Verdict("again")
    if fault == "context":
        return Verdict("abstain", abstention(entry, f"context_overflow: {error}"))
    if fault == "item":  # refused for its content (not its format): fails the same way at every stage
        return Verdict("abstain", abstention(entry, f"the provider refused this request: {error}"))
    return _resend(entry, f"{outcome}: HTTP {status}: {error}")  # transport, timeout, rate limit: not the item's


def abstention(entry: Pending, reason: str | None = None) -> JudgeResult:
    """The same abstention a direct call records (every strategy failed, or the item was refused)."""
    from dspy import Prediction

    reason = reason or f"all strategies failed; last problem: {entry.last_problem}"
    prediction = Prediction(judgment=None, abstained=True, reason=reason, attempts=entry.attempts)
    return entry.judge.build_result(entry.item.id, entry.part, prediction, CallRecord(attempts=entry.attempts), 0.0,
                                    entry.judge.identity(entry.item, entry.part)[0].input_hash)
