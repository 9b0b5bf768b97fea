"""Anthropic Message Batches (``/v1/messages/batches``).

Each entry's ``params`` are what DSPy's native Anthropic client sends for the chain's request
(``AnthropicLM._payload``), and each answer is read by the same client's ``parse_response`` (both through
``lm/dspy_compat.py``, where every DSPy internal lives), so batch and
direct calls agree on prompts, structured-output settings and parsing. HTTP goes through httpx (a
dependency of the openai SDK and litellm) because lm15's own batch helper numbers entries 0..n-1 instead of
carrying our judgment keys.

Anthropic batches carry no metadata, so a batch created but not recorded (a kill, or a create answered 500
after the server made it) is found without clocks: among the listed batches this store has not recorded,
the one with the intent's number of entries; an ended candidate must answer exactly the intent's keys.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from scijudge.errors import ModelError
from scijudge.lm import dspy_compat
from scijudge.run.batch.openai import BatchFault, BatchState, ResultsUnavailable, read_result_lines

_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                 "permission_error": 403, "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
                 "api_error": 500, "overloaded_error": 529}
_PAGES = 10  # pages of 100 batches an orphan look-up reads

_STATUS = {"in_progress": "in_progress", "canceling": "cancelling"}


class AnthropicBatchAPI:
    """Submit, poll and read Anthropic message batches whose entries carry judgment keys as ``custom_id``."""

    provider = "anthropic"
    strategies = ("json_schema",)  # the Messages API has no any-JSON mode: json_object is never sent

    def __init__(self, api_base: str | None, api_key: str | None) -> None:
        import httpx
        from dspy import lm15

        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelError("Anthropic batch mode needs ANTHROPIC_API_KEY")
        self.api_base = api_base
        self._base = (api_base or "https://api.anthropic.com/v1").rstrip("/")
        self._lm = lm15.AnthropicLM(api_key=key, base_url=self._base)
        self._http = httpx.Client(timeout=120, headers={"x-api-key": key, "anthropic-version": "2023-06-01",
                                                        "content-type": "application/json"})

    def line(self, key: str, judge: Any, inputs: dict[str, Any], *, strategy: str, temperature: float,
             max_tokens: int) -> dict[str, Any]:
        """One entry: the judgment key as custom_id and the Messages params the chain's request becomes."""
        lm = judge.lm
        request = judge.chain.lm15_request(lm.model.split("/", 1)[-1], judge.signature, judge.demos,
                                           inputs, strategy=strategy, temperature=temperature, max_tokens=max_tokens)
        return {"custom_id": key, "params": dspy_compat.anthropic_payload(self._lm, request)}

    def _call(self, method: str, url: str, what: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, url, **kwargs)
        except Exception as exc:
            raise BatchFault(f"anthropic batches: could not {what}: {str(exc)[:300]}") from exc
        if response.status_code >= 400:
            raise BatchFault(f"anthropic batches: could not {what}: HTTP {response.status_code}: "
                             f"{response.text[:300]}", status=response.status_code)
        return response

    def submit(self, lines: list[dict[str, Any]], client_id: str,
               known: Collection[str] = ()) -> tuple[str, str]:
        """Create the batch (Anthropic takes the entries inline); returns (remote id, status). After a failed
        create the batch is looked up (``find``) before the error is raised: a batch made is never made twice."""
        try:
            batch = self._call("POST", f"{self._base}/messages/batches", "create a batch",
                               json={"requests": lines}).json()
        except BatchFault as exc:
            if exc.status is not None and exc.status < 500 and exc.status not in (408, 409, 429):
                raise  # refused: nothing was made
            found = self._find(len(lines), {line["custom_id"] for line in lines}, known)
            if found is not None:
                return found
            raise
        return batch["id"], _STATUS.get(batch.get("processing_status", ""), "in_progress")

    def find(self, record: Any, known: Collection[str]) -> tuple[str, str] | None:
        """(remote id, status) of a batch created for this intent whose id was not recorded."""
        return self._find(record.total, set(record.keys), known)

    def _find(self, total: int, keys: set[str], known: Collection[str]) -> tuple[str, str] | None:
        listed: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 100}
        for _ in range(_PAGES):
            page = self._call("GET", f"{self._base}/messages/batches", "list batches", params=params).json()
            listed.extend(page.get("data") or [])
            if not page.get("has_more") or not page.get("last_id"):
                break
            params = {"limit": 100, "after_id": page["last_id"]}
        candidates = [b for b in listed if b.get("id") not in known
                      and sum((b.get("request_counts") or {}).values()) == total]
        matching = []
        for batch in candidates:
            if batch.get("processing_status") == "ended" and batch.get("results_url"):
                state = BatchState(status="ended")
                text = self._call("GET", batch["results_url"], f"download the results of batch {batch['id']}").text
                read_result_lines(text, f"batch {batch['id']}", state, lambda line: None)
                if set(state.lines) != keys:
                    continue  # another intent's (or another tool's) batch of the same size
            matching.append(batch)
        if len(matching) > 1:
            raise BatchFault(f"{len(matching)} unrecorded batches of {total} entries could be this run's "
                             f"({', '.join(b['id'] for b in matching[:5])}); none is adopted")
        if not matching:
            return None
        return matching[0]["id"], _STATUS.get(matching[0].get("processing_status", ""), "in_progress")

    def cancel(self, remote_id: str) -> None:
        """Ask the provider to stop the batch (entries it already ran stay billed)."""
        self._call("POST", f"{self._base}/messages/batches/{remote_id}/cancel", f"cancel batch {remote_id}")

    def poll(self, remote_id: str) -> BatchState:
        """The batch's status; once ended, every readable entry's result by custom_id."""
        batch = self._call("GET", f"{self._base}/messages/batches/{remote_id}", f"poll batch {remote_id}").json()
        counts = batch.get("request_counts") or {}
        state = BatchState(status=_STATUS.get(batch.get("processing_status", ""), "in_progress"),
                           completed=counts.get("succeeded", 0), failed=counts.get("errored", 0))
        if batch.get("processing_status") == "ended":
            expired = counts.get("expired", 0) + counts.get("canceled", 0)
            state.status = "expired" if expired and counts.get("expired", 0) else (
                "cancelled" if expired else "completed")
            try:
                text = self._call("GET", batch["results_url"], f"download the results of batch {remote_id}").text
            except BatchFault as exc:
                raise ResultsUnavailable(str(exc)) from exc
            read_result_lines(text, f"batch {remote_id} results", state, _check_entry, _succeeded)
        return state

    def outcome(self, line: dict[str, Any] | None) -> tuple[int | None, Any, str | None]:
        """(status, lm15 Response when succeeded, error text); status None when expired, cancelled or absent."""
        result = (line or {}).get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            message = result.get("message") or {}
            return 200, dspy_compat.anthropic_batch_answer(self._lm, message), None
        if kind in ("expired", "canceled"):
            return None, None, f"{kind}: the batch ended before this entry ran"
        if kind == "errored":
            error = result.get("error") or {}
            inner = error.get("error", error) if isinstance(error, dict) else {}
            status = _ERROR_STATUS.get(str(inner.get("type")), 500)
            return status, None, str(inner.get("message") or "the entry errored")[:300]
        return None, None, "no result for this entry"


def _succeeded(entry: dict[str, Any]) -> bool:
    """An Anthropic result entry that carries an answer."""
    result = entry.get("result")
    return isinstance(result, dict) and result.get("type") == "succeeded"


def _check_entry(entry: dict[str, Any]) -> str | None:
    """Why an Anthropic batch result entry cannot be used, or None."""
    result = entry.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("type"), str):
        return "no result type"
    if result["type"] == "succeeded":
        message = result.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return "succeeded but has no message content"
    return None
