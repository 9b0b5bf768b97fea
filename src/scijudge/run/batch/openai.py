"""The OpenAI-compatible files + batches API (OpenAI, vLLM's batch runner, gateways that speak it).

Uses the ``openai`` SDK (a litellm dependency, so always installed) with the judge LM's ``api_base``.
Creating a batch is idempotent: the create call is never retried blindly; after a failed create the batch is
looked up by scijudge's own client id (sent as batch metadata) before another is made. Result files are
read line by line: a line that cannot be read is reported (one line each), the other lines are kept; the executor
then says how many judgments without a readable line are sent again and how many have had their last try.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from scijudge.errors import BatchFault, ModelError, ResultsUnavailable

METADATA_KEY = "scijudge_client_id"
_CREATE_TRIES = 3
UNANSWERED_CODES = ("batch_expired", "batch_cancelled")


@dataclass
class BatchState:
    """What polling a batch returned; ``lines`` (custom_id → result line) only once it is final, and one
    ``problems`` entry per result line that could not be read."""

    status: str
    completed: int = 0
    failed: int = 0
    lines: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reason: str = ""  # why the provider failed the whole batch (status ``failed``), in its words


def read_result_lines(text: str, where: str, state: BatchState,
                      check: Callable[[dict[str, Any]], str | None],
                      answered: Callable[[dict[str, Any]], bool] = lambda line: False) -> None:
    """Add every readable line of a result file to ``state.lines``; one problem per unreadable line.

    A ``custom_id`` that comes back twice (a provider that writes the answer, then an error copy) keeps its
    answered line (``answered``: a 200 / succeeded line), whichever comes first; the first line otherwise. The
    repeat is noted in ``state.notes``: the paid answer is stored, never bought again.
    """
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            state.problems.append(f"{where} line {number}: not JSON ({exc.msg})")
            continue
        custom_id = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            state.problems.append(f"{where} line {number}: no custom_id")
            continue
        problem = check(line)
        if problem is not None:
            state.problems.append(f"{where} line {number} (custom_id {custom_id[:40]}): {problem}")
            continue
        earlier = state.lines.get(custom_id)
        if earlier is not None:
            keep = line if answered(line) and not answered(earlier) else earlier
            state.notes.append(f"{where} line {number}: custom_id {custom_id[:40]} came back again; "
                               f"{'its answered line is kept' if answered(keep) else 'its first line is kept'}")
            line = keep
        state.lines[custom_id] = line


def _check_line(line: dict[str, Any]) -> str | None:
    """Why an OpenAI batch result line cannot be used, or None."""
    response = line.get("response")
    if response is None:
        return None if isinstance(line.get("error"), dict) else "neither a response nor an error"
    if not isinstance(response, dict):
        return "response is not an object"
    if response.get("status_code") == 200:
        body = response.get("body")
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) \
                or not isinstance(choices[0].get("message"), dict):
            return "status 200 but the body has no choices[0].message"
    return None


class OpenAIBatchAPI:
    """Submit, poll and read batches of chat-completion lines."""

    provider = "openai"
    strategies = ("json_schema", "json_object")

    def __init__(self, api_base: str | None, api_key: str | None, *, completion_window: str = "24h",
                 backoff: float = 1.0) -> None:
        import openai

        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ModelError("batch mode needs OPENAI_API_KEY (or an --api-base server, which takes any key)")
        self._client = openai.OpenAI(base_url=api_base, api_key=key, max_retries=2)
        self.api_base = api_base
        self.completion_window = completion_window
        self.backoff = backoff

    def line(self, key: str, judge: Any, inputs: dict[str, Any], *, strategy: str, temperature: float,
             max_tokens: int) -> dict[str, Any]:
        """One batch line: the judgment key as custom_id and the body the chain sends at this stage."""
        lm = judge.lm
        body = judge.chain.chat_body(lm.model.split("/", 1)[-1], judge.signature, judge.demos,
                                     inputs, strategy=strategy, temperature=temperature, max_tokens=max_tokens)
        return {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": body}

    def outcome(self, line: dict[str, Any] | None) -> tuple[int | None, Any, str | None]:
        """(HTTP status, lm15 Response when 200, error text) of one result line; status None if unanswered."""
        from dspy import lm15

        status, body, error = line_outcome(line)
        return status, (lm15.response_from_openai_chat(body) if body is not None else None), error

    def submit(self, lines: list[dict[str, Any]], client_id: str,
               known: Collection[str] = ()) -> tuple[str, str]:
        """Upload the lines and create the batch; returns (remote id, status). A failed create is followed by a
        look-up by client id before any new create, so a create the server made but answered 500 is adopted."""
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
        try:
            uploaded = self._client.files.create(file=(f"{client_id}.jsonl", payload), purpose="batch")
        except Exception as exc:
            raise BatchFault(f"could not upload a batch file: {_short(exc)}") from exc
        creator = self._client.with_options(max_retries=0)
        for attempt in range(_CREATE_TRIES):
            try:
                batch = creator.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                               completion_window=self.completion_window,  # type: ignore[arg-type]
                                               metadata={METADATA_KEY: client_id})
                return batch.id, batch.status
            except Exception as exc:
                if not _transient(exc) or attempt == _CREATE_TRIES - 1:
                    raise BatchFault(f"could not create a batch: {_short(exc)}") from exc
            found = self.find_id(client_id)
            if found is not None:
                return found
            time.sleep(self.backoff * 2 ** attempt)
        raise AssertionError("unreachable")

    def find(self, record: Any, known: Collection[str]) -> tuple[str, str] | None:
        """(remote id, status) of a batch created for this intent whose id was not recorded, by metadata."""
        return self.find_id(record.client_id)

    def find_id(self, client_id: str) -> tuple[str, str] | None:
        try:
            for batch in self._client.batches.list(limit=100):
                if (batch.metadata or {}).get(METADATA_KEY) == client_id:
                    return batch.id, batch.status
        except Exception as exc:
            raise BatchFault(f"could not list batches to look up batch {client_id}: {_short(exc)}") from exc
        return None

    def cancel(self, remote_id: str) -> None:
        """Ask the provider to stop the batch (lines it already ran stay billed)."""
        try:
            self._client.batches.cancel(remote_id)
        except Exception as exc:
            raise BatchFault(f"could not cancel batch {remote_id}: {_short(exc)}") from exc

    def poll(self, remote_id: str) -> BatchState:
        """The batch's status; when it has ended, every readable result line it produced."""
        try:
            batch = self._client.batches.retrieve(remote_id)
        except Exception as exc:
            raise BatchFault(f"could not poll batch {remote_id}: {_short(exc)}") from exc
        counts = batch.request_counts
        state = BatchState(status=batch.status, completed=getattr(counts, "completed", 0) or 0,
                           failed=getattr(counts, "failed", 0) or 0)
        if batch.status == "failed":
            state.reason = failure_reason(batch)
        if batch.status in ("completed", "expired", "failed", "cancelled"):
            for name, file_id in (("output", batch.output_file_id), ("error", batch.error_file_id)):
                if file_id:
                    try:
                        text = self._client.files.content(file_id).text
                    except Exception as exc:
                        raise ResultsUnavailable(f"could not download the {name} file of batch {remote_id}: "
                                                 f"{_short(exc)}") from exc
                    read_result_lines(text, f"batch {remote_id} {name} file", state, _check_line, _answered)
        return state


def failure_reason(batch: Any) -> str:
    """Why the provider failed a whole batch, in its words (``errors.data``: code, message, line), or ''."""
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    said = []
    for error in errors[:3]:
        where = f"line {error.line}: " if getattr(error, "line", None) is not None else ""
        said.append(f"{where}{getattr(error, 'message', None) or getattr(error, 'code', None) or 'no message'}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(said)[:500] + more


def _answered(line: dict[str, Any]) -> bool:
    """An OpenAI result line that carries an answer (status 200)."""
    response = line.get("response")
    return isinstance(response, dict) and response.get("status_code") == 200


def line_outcome(line: dict[str, Any] | None) -> tuple[int | None, dict[str, Any] | None, str | None]:
    """(HTTP status, chat.completion body when 200, error text) of one result line; status None when the line
    was never answered (absent, or in the error file as ``batch_expired``/``batch_cancelled``)."""
    if line is None:
        return None, None, "no result for this line"
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body") or {}
    if status == 200:
        return 200, body, None
    error = (body.get("error") or {}).get("message") if isinstance(body, dict) else None
    line_error = line.get("error") or {}
    if status is None:  # never executed: expired or cancelled before the provider reached it
        code = line_error.get("code") or "no response"
        return None, None, f"{code}: {line_error.get('message') or 'the batch ended before this line ran'}"[:300]
    error = error or line_error.get("message") or "the line failed"
    return status, None, str(error)[:300]


def _transient(exc: BaseException) -> bool:
    """A create that may have reached the server (5xx, timeout, reset): look it up before trying again."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in (408, 409, 429)
    return isinstance(exc, (openai.APIConnectionError, openai.APITimeoutError))


def _short(exc: Exception) -> str:
    return str(exc).replace("\n", " ")[:300]
