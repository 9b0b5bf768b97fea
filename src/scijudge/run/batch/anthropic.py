"""Anthropic Message Batches (``/v1/messages/batches``).

Each entry's ``params`` are what DSPy's native Anthropic client sends for the chain's request
(``AnthropicLM._payload``), and each answer is read by the same client's ``parse_response`` (both through
``lm/_dspy_compat.py``, where every DSPy internal lives), so batch and
direct calls agree on prompts, structured-output settings and parsing. HTTP goes through httpx (a
dependency of the openai SDK and litellm) because lm15's own batch helper numbers entries 0..n-1 instead of
carrying our judgment keys.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from scijudge.errors import ModelError
from scijudge.run.batch.openai import BatchState
from scijudge.lm import _dspy_compat

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
        return {"custom_id": key, "params": _dspy_compat.anthropic_payload(self._lm, request)}

    def _call(self, method: str, url: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, url, **kwargs)
        except Exception as exc:
            raise ModelError(f"anthropic batches: {str(exc)[:300]}") from exc
        if response.status_code >= 400:
            raise ModelError(f"anthropic batches: HTTP {response.status_code}: {response.text[:300]}")
        return response

    def submit(self, lines: list[dict[str, Any]], client_id: str) -> tuple[str, str]:
        """Create the batch (Anthropic takes the entries inline); returns (remote id, status)."""
        batch = self._call("POST", f"{self._base}/messages/batches", json={"requests": lines}).json()
        return batch["id"], _STATUS.get(batch.get("processing_status", ""), "in_progress")

    def find(self, record: Any) -> str | None:
        """A batch created for this intent whose id was not recorded: Anthropic batches carry no metadata, so
        the match is the one batch created within a minute after the intent with the same number of entries."""
        listed = self._call("GET", f"{self._base}/messages/batches", params={"limit": 100}).json().get("data", [])
        since = datetime.fromisoformat(record.created_at).timestamp() - 1
        matches = [b["id"] for b in listed if since <= _timestamp(b.get("created_at")) <= since + 61
                   and sum((b.get("request_counts") or {}).values()) == record.total]
        return matches[0] if len(matches) == 1 else None

    def poll(self, remote_id: str) -> BatchState:
        """The batch's status; once ended, every entry's result by custom_id."""
        batch = self._call("GET", f"{self._base}/messages/batches/{remote_id}").json()
        counts = batch.get("request_counts") or {}
        state = BatchState(status=_STATUS.get(batch.get("processing_status", ""), "in_progress"),
                           completed=counts.get("succeeded", 0), failed=counts.get("errored", 0))
        if batch.get("processing_status") == "ended":
            expired = counts.get("expired", 0) + counts.get("canceled", 0)
            state.status = "expired" if expired and counts.get("expired", 0) else (
                "cancelled" if expired else "completed")
            text = self._call("GET", batch["results_url"]).text
            for raw in text.splitlines():
                if raw.strip():
                    entry = json.loads(raw)
                    state.lines[entry["custom_id"]] = entry
        return state

    def outcome(self, line: dict[str, Any] | None) -> tuple[int | None, Any, str | None]:
        """(status, lm15 Response when succeeded, error text); status None when expired, cancelled or absent."""
        result = (line or {}).get("result") or {}
        kind = result.get("type")
        if kind == "succeeded":
            message = result.get("message") or {}
            return 200, _dspy_compat.anthropic_batch_answer(self._lm, message), None
        if kind == "errored":
            error = result.get("error") or {}
            inner = error.get("error", error) if isinstance(error, dict) else {}
            status = 400 if inner.get("type") == "invalid_request_error" else 500
            return status, None, str(inner.get("message") or "the entry errored")[:300]
        return None, None, "no result for this entry"


def _timestamp(value: Any) -> float:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
