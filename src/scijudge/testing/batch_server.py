"""A loopback OpenAI-compatible server that also speaks the files and batches APIs.

It serves ``/v1/files`` (upload, content) and ``/v1/batches`` (create, retrieve, list, cancel) beside the
chat endpoint of ``OpenAICompatServer``; each batch line is answered by the same handler as a direct chat
request (and Anthropic's ``/v1/messages/batches``, each entry answered from its Messages params).
Batches complete after ``complete_after`` seconds (or when ``hold`` is cleared), a Fault answer
goes to the batch's error file, and ``expire`` picks batches that end as ``expired`` with only part of
their lines answered. Tests and benchmarks count what arrived: direct chat requests, batches and lines.

Fault modes (each one a way a real provider or gateway has failed): ``create_fault`` (the batch is created,
then the create is answered 500), ``expired_in_error_file`` (unanswered lines are written to the error file
with ``batch_expired``, as OpenAI does), ``damage`` (rewrites a result file before it is served: bad JSON, a
cut-off line, a line without ``custom_id``...), ``content_faults`` (that many result downloads answered 500),
``list_batches=False`` (a gateway without ``GET /v1/batches``), ``clock_offset`` (the provider's clock is off
by that many seconds), ``fail`` (given the batch's index, a reason: the batch ends ``failed`` with that reason
and no line run); ``forget(id)`` makes a batch answer 404; ``cancel_calls`` counts cancels.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from scijudge.testing.openai_server import Fault, Handler, OpenAICompatServer, Reply
from datetime import UTC


class BatchServer(OpenAICompatServer):
    """``OpenAICompatServer`` plus ``/v1/files`` and ``/v1/batches``.

    Args:
        handler: answers each request (direct or batch line), as for ``OpenAICompatServer``.
        complete_after: seconds after creation before a batch reports ``completed``.
        expire: called with the batch's 0-based creation index; True makes that batch end ``expired``
            with only its first half of lines answered.
        hold: while this event is set, no batch completes (tests kill a client during a pending batch).
    """

    def __init__(self, handler: Handler, *, complete_after: float = 0.0,
                 expire: Callable[[int], bool] | None = None, hold: threading.Event | None = None,
                 create_fault: Callable[[int], bool] | None = None, expired_in_error_file: bool = False,
                 damage: Callable[[bytes], bytes] | None = None, content_faults: int = 0,
                 list_batches: bool = True, clock_offset: float = 0.0,
                 fail: Callable[[int], str | None] | None = None) -> None:
        super().__init__(handler)
        self.complete_after = complete_after
        self.expire = expire or (lambda index: False)
        self.hold = hold or threading.Event()
        self.create_fault = create_fault or (lambda index: False)
        self.expired_in_error_file = expired_in_error_file
        self.damage = damage
        self.content_faults = content_faults
        self.list_batches = list_batches
        self.clock_offset = clock_offset
        self.fail = fail or (lambda index: None)
        self.cancel_calls = 0
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_lines: list[dict[str, Any]] = []
        self.retrievals = 0
        self.create_calls = 0
        self.downloads = 0

    def forget(self, batch_id: str) -> None:
        """The provider no longer knows this batch: it answers 404."""
        with self._lock:
            self.batches.pop(batch_id)

    def _now(self) -> float:
        return time.time() + self.clock_offset

    def _created(self, batch: dict[str, Any], index: int) -> Any:
        """The create's answer: the batch, or (``create_fault``) a 500 although the batch was made."""
        from aiohttp import web

        if self.create_fault(index):
            return web.json_response({"error": {"message": "internal error", "type": "server_error"}}, status=500)
        return web.json_response(batch)

    def _served(self, content: bytes) -> Any:
        """A result file as served: 500 while ``content_faults`` lasts, ``damage``d when asked."""
        from aiohttp import web

        with self._lock:
            self.downloads += 1
            if self.content_faults > 0:
                self.content_faults -= 1
                return web.json_response({"error": {"message": "storage unavailable", "type": "server_error"}},
                                         status=500)
        body = self.damage(content) if self.damage is not None else content
        return web.Response(body=body, content_type="application/octet-stream")

    @property
    def batch_count(self) -> int:
        """How many batches were created."""
        with self._lock:
            return len(self.batches)

    max_request_bytes = 1024 * 1024 * 1024  # batch input files are large

    def _add_routes(self, app: Any) -> None:
        super()._add_routes(app)
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{id}/content", self._content)
        app.router.add_get("/v1/files/{id}", self._file)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches", self._list)
        app.router.add_get("/v1/batches/{id}", self._retrieve)
        app.router.add_post("/v1/batches/{id}/cancel", self._cancel)
        app.router.add_post("/v1/messages/batches", self._anthropic_create)
        app.router.add_get("/v1/messages/batches", self._anthropic_list)
        app.router.add_get("/v1/messages/batches/{id}", self._anthropic_retrieve)
        app.router.add_get("/v1/messages/batches/{id}/results", self._anthropic_results)
        app.router.add_post("/v1/messages/batches/{id}/cancel", self._anthropic_cancel)

    # --- files -----------------------------------------------------------------------------------
    def _new_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"id": f"file-{uuid.uuid4().hex[:16]}", "object": "file", "bytes": len(content),
                "created_at": int(time.time()), "filename": filename, "purpose": purpose, "status": "processed"}
        with self._lock:
            self.files[meta["id"]] = {"meta": meta, "content": content}
        return meta

    async def _upload(self, request: Any) -> Any:
        from aiohttp import web

        form = await request.post()
        upload = form["file"]
        content = upload.file.read() if hasattr(upload, "file") else str(upload).encode()
        return web.json_response(self._new_file(content, getattr(upload, "filename", "input.jsonl"),
                                                str(form.get("purpose", "batch"))))

    async def _file(self, request: Any) -> Any:
        from aiohttp import web

        found = self.files.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such file", "type": "invalid_request_error"}},
                                     status=404)
        return web.json_response(found["meta"])

    async def _content(self, request: Any) -> Any:
        from aiohttp import web

        found = self.files.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such file", "type": "invalid_request_error"}},
                                     status=404)
        if found["meta"]["purpose"] == "batch_output":
            return self._served(found["content"])
        return web.Response(body=found["content"], content_type="application/octet-stream")

    # --- batches ---------------------------------------------------------------------------------
    async def _create(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        source = self.files.get(body.get("input_file_id", ""))
        if source is None:
            return web.json_response({"error": {"message": "input file not found", "type": "invalid_request_error"}},
                                     status=400)
        lines = [json.loads(line) for line in source["content"].decode().splitlines() if line.strip()]
        with self._lock:
            self.create_calls += 1
            index = len(self.batches)
            batch = {"id": f"batch_{uuid.uuid4().hex[:16]}", "object": "batch", "endpoint": body["endpoint"],
                     "input_file_id": body["input_file_id"], "completion_window": body.get("completion_window", "24h"),
                     "status": "in_progress", "created_at": int(self._now()), "metadata": body.get("metadata") or {},
                     "output_file_id": None, "error_file_id": None, "errors": None,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            self.batches[batch["id"]] = {"batch": batch, "lines": lines, "index": index, "t0": time.monotonic()}
            self.batch_lines.extend(lines)
        return self._created(batch, index)

    async def _retrieve(self, request: Any) -> Any:
        from aiohttp import web

        found = self.batches.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such batch", "type": "invalid_request_error"}},
                                     status=404)
        with self._lock:
            self.retrievals += 1
        batch = found["batch"]
        due = time.monotonic() - found["t0"] >= self.complete_after and not self.hold.is_set()
        if batch["status"] == "in_progress" and due:
            self._finish(found)
        return web.json_response(batch)

    async def _list(self, request: Any) -> Any:
        from aiohttp import web

        if not self.list_batches:
            return web.json_response({"error": {"message": "Not Found", "type": "invalid_request_error"}}, status=404)
        data = [found["batch"] for found in self.batches.values() if not found.get("anthropic")]
        return web.json_response({"object": "list", "data": data[::-1], "has_more": False})

    async def _cancel(self, request: Any) -> Any:
        from aiohttp import web

        found = self.batches.get(request.match_info["id"])
        if found is None:
            return web.json_response({"error": {"message": "no such batch"}}, status=404)
        with self._lock:
            self.cancel_calls += 1
        found["batch"]["status"] = "cancelled"
        return web.json_response(found["batch"])

    async def _anthropic_cancel(self, request: Any) -> Any:
        from aiohttp import web

        found = self.batches.get(request.match_info["id"])
        if found is None:
            return web.json_response({"type": "error", "error": {"type": "not_found_error", "message": "no batch"}},
                                     status=404)
        with self._lock:
            self.cancel_calls += 1
        found["batch"]["processing_status"] = "canceling"
        return web.json_response(found["batch"])

    def _finish(self, found: dict[str, Any]) -> None:
        """Answer the batch's lines through the handler and write its output and error files."""
        batch, lines = found["batch"], found["lines"]
        reason = self.fail(found["index"])
        if reason is not None:  # the provider refused the whole batch (OpenAI's input-file validation)
            batch["status"] = "failed"
            batch["failed_at"] = int(self._now())
            batch["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": reason, "line": 1,
                                                           "param": None}]}
            batch["request_counts"] = {"total": len(lines), "completed": 0, "failed": 0}
            return
        expired = self.expire(found["index"])
        answered = lines[: len(lines) // 2] if expired else lines
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        if expired and self.expired_in_error_file:  # OpenAI writes the lines it never ran to the error file
            errors.extend({"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": line["custom_id"],
                           "response": None, "error": {"code": "batch_expired", "message": "This request could "
                                                       "not be executed before the completion window expired."}}
                          for line in lines[len(lines) // 2:])
        for line in answered:
            outcome = _as_batch_outcome(self.handler(line["body"]))
            record = {"id": f"batch_req_{uuid.uuid4().hex[:12]}", "custom_id": line["custom_id"], "error": None}
            if isinstance(outcome, Fault):
                record["response"] = {"status_code": outcome.status, "request_id": uuid.uuid4().hex,
                                      "body": {"error": {"message": outcome.message, "type": outcome.error_type}}}
                errors.append(record)
            else:
                record["response"] = {"status_code": 200, "request_id": uuid.uuid4().hex,
                                      "body": _completion(line["body"], outcome)}
                outputs.append(record)
        if outputs:
            batch["output_file_id"] = self._new_file(_jsonl(outputs), "output.jsonl", "batch_output")["id"]
        if errors:
            batch["error_file_id"] = self._new_file(_jsonl(errors), "errors.jsonl", "batch_output")["id"]
        batch["request_counts"] = {"total": len(lines), "completed": len(outputs), "failed": len(errors)}
        batch["status"] = "expired" if expired else "completed"
        batch["completed_at" if not expired else "expired_at"] = int(self._now())


    # --- Anthropic message batches -------------------------------------------------------------------
    async def _anthropic_create(self, request: Any) -> Any:

        body = await request.json()
        lines = body["requests"]
        with self._lock:
            self.create_calls += 1
            index = len(self.batches)
            batch: dict[str, Any] = {"id": f"msgbatch_{uuid.uuid4().hex[:16]}", "type": "message_batch",
                     "processing_status": "in_progress", "created_at": _iso(self._now()), "ended_at": None,
                     "results_url": None, "request_counts": {"processing": len(lines), "succeeded": 0,
                                                             "errored": 0, "canceled": 0, "expired": 0}}
            self.batches[batch["id"]] = {"batch": batch, "lines": lines, "index": index, "t0": time.monotonic(),
                                         "anthropic": True}
            self.batch_lines.extend(lines)
        return self._created(batch, index)

    async def _anthropic_list(self, request: Any) -> Any:
        from aiohttp import web

        data = [found["batch"] for found in self.batches.values() if found.get("anthropic")]
        return web.json_response({"data": data[::-1], "has_more": False,
                                  "first_id": data[-1]["id"] if data else None,
                                  "last_id": data[0]["id"] if data else None})

    async def _anthropic_retrieve(self, request: Any) -> Any:
        from aiohttp import web

        found = self.batches.get(request.match_info["id"])
        if found is None:
            return web.json_response({"type": "error", "error": {"type": "not_found_error", "message": "no batch"}},
                                     status=404)
        with self._lock:
            self.retrievals += 1
        batch = found["batch"]
        due = time.monotonic() - found["t0"] >= self.complete_after and not self.hold.is_set()
        if batch["processing_status"] == "in_progress" and due:
            self._anthropic_finish(found)
        return web.json_response(batch)

    async def _anthropic_results(self, request: Any) -> Any:
        from aiohttp import web

        found = self.batches.get(request.match_info["id"])
        if found is None or "results" not in found:
            return web.json_response({"type": "error", "error": {"type": "not_found_error", "message": "no batch"}},
                                     status=404)
        return self._served(found["results"])

    def _anthropic_finish(self, found: dict[str, Any]) -> None:
        """Answer the entries through the handler (given each entry's Messages params)."""
        batch, lines = found["batch"], found["lines"]
        expired = self.expire(found["index"])
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        results = []
        for position, line in enumerate(lines):
            if expired and position >= len(lines) // 2:
                results.append({"custom_id": line["custom_id"], "result": {"type": "expired"}})
                counts["expired"] += 1
                continue
            outcome = _as_batch_outcome(self.handler(line["params"]))
            if isinstance(outcome, Fault):
                kind = "invalid_request_error" if outcome.status in (400, 422) else "api_error"
                result = {"type": "errored", "error": {"type": "error",
                                                        "error": {"type": kind, "message": outcome.message}}}
                counts["errored"] += 1
            else:
                result = {"type": "succeeded", "message": {
                    "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
                    "model": line["params"].get("model", "judge"), "content": [{"type": "text", "text": outcome.content}],
                    "stop_reason": "max_tokens" if outcome.finish_reason == "length" else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": outcome.prompt_tokens, "output_tokens": outcome.completion_tokens}}}
                counts["succeeded"] += 1
            results.append({"custom_id": line["custom_id"], "result": result})
        found["results"] = _jsonl(results)
        batch["request_counts"] = counts
        batch["processing_status"] = "ended"
        batch["ended_at"] = _iso(self._now())
        batch["results_url"] = f"{self.url}/messages/batches/{batch['id']}/results"


def _as_batch_outcome(outcome: Any) -> Reply | Fault:
    """A handler's answer as a batch line gets it: text is a reply; a hang or a web page is a failed line."""
    if isinstance(outcome, str):
        return Reply(outcome)
    if isinstance(outcome, (Reply, Fault)):
        return outcome
    return Fault(status=500, message=f"the line failed ({type(outcome).__name__})")


def _iso(seconds: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A chat.completion object, as the chat endpoint would have answered."""
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": reply.content},
                              "finish_reason": reply.finish_reason}
    if reply.logprobs is not None:
        choice["logprobs"] = {"content": reply.logprobs}
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "judge"), "choices": [choice],
            "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                      "total_tokens": reply.prompt_tokens + reply.completion_tokens}}


__all__ = ["BatchServer"]
