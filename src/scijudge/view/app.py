"""The live viewer: a Starlette app over a ``Site``, with the labelling routes when a label file is given.

Every request needs the token of the printed URL: ``?token=`` once (answered with an HttpOnly, SameSite=Strict
cookie and a redirect to the same page without it), the cookie after that. No token: 401; a wrong one: 403.
Pages carry a Content-Security-Policy that lets only the page's own nonce-tagged script run, a second guard
behind the autoescaping: even text that slipped through could not execute.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from scijudge.errors import InputError, ScijudgeError
from scijudge.view.labelling import LabelFile, LabelWriteError, Queue, QueueEntry, Unit, unit_of
from scijudge.view.pages import MATRIX_SORTS, Links, Site
from scijudge.view.stores import Filters

KEYS = {**{str(k): float(k) for k in range(1, 10)}, "0": 10.0}
"""Keyboard keys -> the score they give (``0`` gives 10)."""
MAX_NOTE = 10_000
"""The longest comment or rationale a label takes (characters)."""
StopRule = Callable[[list[dict[str, Any]]], "str | None"]
"""A label-page hook: given every label so far, a line to show above the queue (None: nothing to say), e.g. the
current interval and whether it is certain enough to stop labelling."""


def cookie_name(token: str) -> str:
    """The token cookie's name, its own per server (cookies are shared by every port of a host)."""
    return "scijudge_view_" + hashlib.sha256(token.encode()).hexdigest()[:12]


@dataclass
class Labelling:
    """The labelling side of the app: the label file, the queue and this session's skips."""

    file: LabelFile
    queue: Queue
    skipped: set[Unit] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def done(self, labels: list[dict[str, Any]]) -> set[Unit]:
        return {unit_of(x) for x in labels}


def live_links() -> Links:
    def url(key: str) -> str:
        return "/" if key == "runs" else f"/{key}"

    def page_url(n: int, params: dict[str, Any]) -> str:
        kept = {k: v for k, v in params.items() if v not in (None, "")}
        return "/items?" + urlencode({**kept, "page": n})

    return Links(url=url, item_url=lambda item_id: "/item?" + urlencode({"id": item_id}), page_url=page_url)


class Viewer:
    """The app's state: the site, the token, the labelling (None without ``--label-out``) and scales."""

    def __init__(self, site: Site, token: str, labelling: Labelling | None = None) -> None:
        self.site = site
        self.token = token
        self.labelling = labelling
        self.links = live_links()
        self._scales: dict[str, tuple[float, float, float]] | None = None
        self._specs: dict[str, Any] | None = None
        self._inputs: dict[str, set[str]] = {}  # judge -> the item fields its spec reads
        self._by_hash: dict[str, Any] | None = None
        self._calibration: tuple[Any, str] | None = None
        self.n_boot = 1000
        self.stop_rules: list[StopRule] = []
        self.stop_queue: StopRule | None = None  # a line when labelling can stop (the queue then shows no unit)
        self.ready = threading.Event()  # set once ``warm`` has run
        self.failed: BaseException | None = None
        self._warming = threading.Lock()

    # --- scales and rubrics ----------------------------------------------------------------------------
    def scale_of(self, judge: str) -> tuple[float, float, float]:
        """The judge's grid, resolved as calibrate resolves it: the scale its stores record (``recorded_scales``:
        stores that disagree are refused), else the spec of the stored hash, else the family's default
        (``spec.scales.default_scale``). pandas-free: the label page never waits for the calibration stack."""
        if self._scales is None:
            from scijudge.metrics.frames import source_names
            from scijudge.spec.scales import default_scale, recorded_scales

            view = self.site.view
            rows = view.scale_rows()
            judges = sorted({str(r["judge"]) for r in rows})
            by_store = {name: dict(meta.get("scales") or {}) for name, meta in zip(source_names(view.paths), view.meta())}
            stored = recorded_scales(by_store, judges)  # the one rule of stores
            scales: dict[str, tuple[float, float, float]] = {}
            for name in judges:
                of_judge = [r for r in rows if r["judge"] == name]
                found = stored.get(name) or default_scale(name, str(of_judge[0]["family"]),
                                                          [str(r["spec_hash"]) for r in of_judge],
                                                          self.specs_by_hash())[0]
                scales[name] = (float(found.lo), float(found.hi), float(found.step))
            self._scales = scales
        found_scale = self._scales.get(judge)
        return found_scale if found_scale is not None else (1.0, 5.0, 1.0)

    def specs_by_hash(self) -> dict[str, Any]:
        """Every shipped spec by its content hash (read once)."""
        if self._by_hash is None:
            from scijudge.spec.scales import specs_by_hash

            self._by_hash = specs_by_hash(None)
        return self._by_hash

    def rubric_of(self, judge: str) -> tuple[str, dict[str, str]]:
        """The judge's description and scale anchors, from the shipped spec whose hash a judgment stored."""
        if self._specs is None:
            by_hash = self.specs_by_hash()
            self._specs = {}
            for row in self.site.view.scale_rows():
                spec = by_hash.get(row["spec_hash"])
                if spec is not None:
                    self._specs.setdefault(row["judge"], spec)
        spec = self._specs.get(judge)
        if spec is None:
            return "", {}
        if spec.inputs:
            self._inputs[judge] = {i.name for i in spec.inputs}
        anchors = dict(spec.scale.anchors) if spec.scale is not None else {}
        return f"{spec.description}\n\n{spec.instructions}".strip(), anchors

    def warm(self) -> None:
        """Resolve the judges' scales and rubrics and read the picks files (the labelling page needs them: the
        shipped specs are read, and ``--picks`` imports pandas; never the calibration stack, which only the
        calibration page loads). Run in the background once the server listens, so start-up stays quick; the label
        routes wait for it, and an error stops the server (``failed``)."""
        with self._warming:
            if self.ready.is_set():
                return
            try:
                if self.labelling is not None:
                    self.scale_of("")
                    self.rubric_of("")
                    _ = self.labelling.queue.picks
            except BaseException as exc:
                self.failed = exc
                raise
            finally:
                self.ready.set()

    def _wait_ready(self) -> None:
        """Wait for ``warm`` (running it here when nothing has started it)."""
        with suppress(BaseException):
            self.warm()
        if self.failed is not None:
            raise InputError(f"the viewer could not start labelling: {self.failed}")

    # --- labelling pages ---------------------------------------------------------------------------------
    def label_page(self, flash: str = "", nonce: str = "") -> str:
        assert self.labelling is not None
        self._wait_ready()
        labels = self.site.refresh_labels()
        done = self.labelling.done(labels)
        with self.labelling.lock:
            skipped = set(self.labelling.skipped)
        stopped = self.stop_queue(labels) if self.stop_queue is not None else None
        queue = self.labelling.queue
        entry = None if stopped else self.labelling.file.claim_next(lambda others: queue.next(done, skipped | others))
        mine = sum(1 for x in labels if x.get("annotator") == self.labelling.file.annotator
                   and x.get("file") == self.labelling.file.path.name)
        counts = (f"{mine} labelled by {self.labelling.file.annotator} in {self.labelling.file.path.name}; "
                  f"{self.labelling.queue.remaining_picks(done)} picked units left; {len(skipped)} skipped")
        values: dict[str, Any] = {"entry": entry, "flash": flash, "counts": counts, "nonce": nonce, "unit": None,
                                  "keys": {}, "item": [], "judgments": [], "picks": bool(self.labelling.queue.picks_files),
                                  "stop_notes": [n for rule in self.stop_rules if (n := rule(labels))],
                                  "stopped": stopped}
        if entry is not None:
            values.update(self._entry_values(entry))
        return self.site.render("label.html", self.links, "label", "Label", **values)

    def _entry_values(self, entry: QueueEntry) -> dict[str, Any]:
        item_id, judge, part = entry.unit
        lo, hi, step = self.scale_of(judge)
        levels = []
        n = int(round((hi - lo) / step))
        rubric, anchors = self.rubric_of(judge)
        keys: dict[str, float] = {}
        for k in range(n + 1):
            level = round(lo + k * step, 10)
            key = next((name for name, score in KEYS.items() if score == level), "")
            if key:
                keys[key] = level
            levels.append((f"{level:g}", key, anchors.get(f"{level:g}", anchors.get(str(int(level)), "")
                                                           if level.is_integer() else "")))
        inputs = self.site.items.get(item_id)
        judgments = [j for j in self.site.view.item(item_id) if j["judge"] == judge and j["part"] == part]
        shown, hidden = _split_fields(inputs if isinstance(inputs, list) else [], self._inputs.get(judge))
        return {"unit": list(entry.unit), "keys": keys, "levels": levels, "rubric": rubric,
                "anchors": sorted(anchors.items(), key=lambda kv: _as_float(kv[0])),
                "scale_text": f"{lo:g}–{hi:g} in steps of {step:g}", "item": shown, "hidden_fields": hidden,
                "no_item": inputs if isinstance(inputs, str) else "", "judgments": judgments}

    def add_label(self, body: dict[str, Any]) -> tuple[int, str]:
        """Store one label from the page: 200 written, 409 this annotator had labelled it (another tab, another
        viewer), 400 bad input, 507/503 not written (a full disk; the file locked or unwritable)."""
        assert self.labelling is not None
        self._wait_ready()
        unit = _unit(body)
        score = body.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            return 400, "score must be a number"
        notes = {name: body.get(name) or "" for name in ("comment", "rationale")}
        for name, text in notes.items():
            if not isinstance(text, str) or len(text) > MAX_NOTE:
                return 400, f"{name} must be text of at most {MAX_NOTE} characters"
        lo, hi, step = self.scale_of(unit[1])
        k = (float(score) - lo) / step
        if not lo - 1e-9 <= score <= hi + 1e-9 or abs(k - round(k)) > 1e-6:
            return 400, f"score {score:g} is not on the scale {lo:g}-{hi:g} in steps of {step:g} of {unit[1]}"
        if not self.site.view.judges_of(unit[0]) or (unit[1], unit[2]) not in self.site.view.judges_of(unit[0]):
            return 400, f"no judgment of item {unit[0]!r} by {unit[1]!r} in these stores"
        try:
            written, label = self.labelling.file.add(unit, float(score), comment=notes["comment"].strip(),
                                                     rationale=notes["rationale"].strip())
        except LabelWriteError as exc:
            return exc.status, str(exc)
        with self.labelling.lock:
            self.labelling.skipped.discard(unit)
        if not written:
            return 409, (f"not saved: {unit[0]} · {unit[1]} was labelled already by {label.get('annotator')} (score "
                         f"{label.get('score')}), in another tab or viewer; undo that label first to change it")
        return 200, f"labelled {unit[0]} {unit[1]}: {score:g}"

    def skip(self, body: dict[str, Any]) -> tuple[int, str]:
        """Put one item at the back of this session's queue (the label file is not touched)."""
        assert self.labelling is not None
        with self.labelling.lock:
            self.labelling.skipped.add(_unit(body))
        return 200, "skipped"

    def undo(self) -> dict[str, Any] | None:
        assert self.labelling is not None
        self._wait_ready()
        return self.labelling.file.undo()

    def prompt_page(self, judgment: dict[str, Any]) -> str:
        """The prompt of one judgment, rebuilt from its spec (``view.prompts``)."""
        from scijudge.view.prompts import is_decision, rebuilt

        messages, why = rebuilt(self.specs_by_hash(), self.site.items.item(judgment["item_id"]), judgment)
        return self.site.render("prompt.html", self.links, "items", f"Prompt · {judgment['item_id']}",
                                item_id=judgment["item_id"], judge=judgment["judge"], part=judgment["part"],
                                spec_hash=judgment.get("spec_hash"), messages=messages, why=why,
                                decision=is_decision(judgment.get("decoding")))

    def calibration_page(self) -> str:
        from scijudge.view.figures import calibration_page

        files = self.site.label_files()
        present = [p for p in files if p.exists() and p.stat().st_size]
        if not present:
            return self.site.render("message.html", self.links, "calibration", "Calibration",
                                    message="No labels yet: pass --labels LABELS.jsonl (or label some items at /label "
                                            "with --label-out) to see how the judges agree with them.")
        seen = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in present)
        if self._calibration is None or self._calibration[0] != seen:
            picks = self.labelling.queue.picks_files[0] if self.labelling and self.labelling.queue.picks_files \
                else None
            try:
                page = calibration_page(self.site.view.paths, present, picks, n_boot=self.n_boot)
            except ScijudgeError as exc:
                return self.site.render("message.html", self.links, "calibration", "Calibration",
                                        message=f"cannot calibrate: {exc}")
            self._calibration = (seen, page.replace("<body>", "<body><p><a href='/'>← back to the viewer</a></p>", 1))
        return self._calibration[1]


def _split_fields(fields: list[tuple[str, str]], names: set[str] | None) -> tuple[list[Any], list[Any]]:
    """An item's fields as (what the judge's spec reads, the rest): the rest (``meta``, other inputs: often the
    answer key, an intended quality, known flaws) stays behind the switch that hides the judgments."""
    def read(name: str) -> bool:
        field_name = "papers" if name.startswith("paper [") else name
        return field_name != "meta" and (names is None or field_name in names)

    return [f for f in fields if read(f[0])], [f for f in fields if not read(f[0])]


def _as_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("inf")


def _unit(body: dict[str, Any]) -> Unit:
    item_id, judge, part = body.get("item_id"), body.get("judge"), body.get("part") or ""
    if not isinstance(item_id, str) or not isinstance(judge, str) or not isinstance(part, str) or not item_id or not judge:
        raise InputError("a label needs item_id and judge (text)", field="item_id")
    return item_id, judge, part


def filters_of(query: Any) -> tuple[Filters, str, bool, int]:
    """The items table's filters, sort and page from a query string (bad numbers: no filter)."""

    def number(name: str) -> float | None:
        try:
            return float(query.get(name)) if query.get(name) not in (None, "") else None
        except ValueError:
            return None

    try:
        page = max(1, int(query.get("page") or 1))
    except ValueError:
        page = 1
    filters = Filters(judge=query.get("judge") or None, model=query.get("model") or None,
                      status=query.get("status") or None, score_min=number("min"), score_max=number("max"),
                      text=query.get("q") or None)
    return filters, query.get("sort") or "stored", query.get("desc") in ("1", "true", "on"), page


def build_app(viewer: Viewer) -> Any:
    """The Starlette app of a viewer: the browsing pages, then the labelling routes, behind the token gate."""
    from starlette.applications import Starlette

    return TokenGate(Starlette(routes=[*_browse_routes(viewer), *_label_routes(viewer)]), viewer.token)


def _page(text: str, nonce: str = "") -> Any:
    """An HTML page with its security headers (only the page's own nonce-tagged script may run)."""
    from starlette.responses import HTMLResponse

    script = f"'nonce-{nonce}'" if nonce else "'none'"
    return HTMLResponse(text, headers={
        "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                                   f"script-src {script}; connect-src 'self'; form-action 'self'; "
                                   "frame-ancestors 'none'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


def _one_line(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A GET page whose failure is one line (a store found damaged since start: as every reader says it; a
    bug: its type and message, also on the console), never a traceback."""
    from starlette.responses import PlainTextResponse

    def guarded(request: Any) -> Any:
        try:
            return handler(request)
        except ScijudgeError as exc:
            return PlainTextResponse(f"scijudge view: {exc}", status_code=500)
        except Exception as exc:
            import sys

            line = f"scijudge view: {request.url.path} failed: {type(exc).__name__}: {exc}"
            print(line, file=sys.stderr, flush=True)
            return PlainTextResponse(line, status_code=500)

    return guarded


def _browse_routes(viewer: Viewer) -> list[Any]:
    """The pages: runs, /live, the matrix, drift, items, one item, its prompt, calibration."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    # GET pages are plain functions: Starlette runs them in its thread pool, off the event loop.
    def runs(request: Request) -> Response:
        nonce = secrets.token_urlsafe(12)
        return _page(viewer.site.runs_page(viewer.links, nonce=nonce), nonce)

    def live(request: Request) -> Response:
        """The runs page's numbers now (its script polls this while a run writes a store)."""
        found = viewer.site.live()
        return JSONResponse({"total": found["total"], "progress": found["progress"],
                             "rows": [{"key": r["key"], "cells": r["cells"]} for r in found["rows"]]},
                            headers={"Cache-Control": "no-store"})

    def matrix(request: Request) -> Response:
        try:
            number = int(request.query_params.get("page") or 1)
        except ValueError:
            number = 1
        sort = request.query_params.get("sort") or "spread"
        return _page(viewer.site.matrix_page(viewer.links, request.query_params.get("judge"),
                                            sort if sort in MATRIX_SORTS else "spread", number))

    def drift(request: Request) -> Response:
        return _page(viewer.site.drift_page(viewer.links))

    def items(request: Request) -> Response:
        filters, sort, descending, number = filters_of(request.query_params)
        try:
            nonce = secrets.token_urlsafe(12)
            return _page(viewer.site.items_page(viewer.links, filters, sort=sort, descending=descending, page=number,
                                               nonce=nonce), nonce)
        except InputError as exc:
            if exc.field != "sort":  # a store that cannot be read: the server's side (one_line: 500)
                raise
            return PlainTextResponse(str(exc), status_code=400)

    def item(request: Request) -> Response:
        item_id = request.query_params.get("id")
        if not item_id:
            return PlainTextResponse("give the item as /item?id=ITEM", status_code=400)
        if not viewer.site.known(item_id):
            return PlainTextResponse(f"no item {item_id!r} in these stores or items files", status_code=404)
        filters, sort, descending, _number = filters_of(request.query_params)
        kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("id", "page", "token")]
        neighbours = viewer.site.view.neighbours(item_id, filters, sort=sort, descending=descending) if kept \
            else (None, None)  # an item opened from the items table (its filter and sort in the query) steps along it
        return _page(viewer.site.item_page(
            viewer.links, item_id, neighbours=neighbours,
            suffix="&" + urlencode(kept) if kept else "", prompt_url=prompt_url))

    def prompt_url(judgment: dict[str, Any]) -> str:
        return "/prompt?" + urlencode({"id": judgment["item_id"], "judge": judgment["judge"],
                                       "part": judgment.get("part") or "", "model": judgment.get("model") or "",
                                       "store": judgment.get("store", "")})

    def prompt(request: Request) -> Response:
        """One judgment's prompt: the item's judgment by this judge (and part), of the model and store the link names
        (each model's judgment has its own prompt: a decision judgment's differs); without them, the first."""
        query = request.query_params
        item_id, judge = query.get("id") or "", query.get("judge") or ""
        found = [j for j in viewer.site.view.item(item_id) if j["judge"] == judge
                 and (j["part"] or "") == (query.get("part") or "")
                 and query.get("model", j["model"]) == j["model"]
                 and query.get("store", str(j.get("store"))) == str(j.get("store"))]
        if not found:
            return PlainTextResponse(f"no judgment of item {item_id!r} by {judge!r} in these stores", status_code=404)
        return _page(viewer.prompt_page(found[0]))

    def calibration(request: Request) -> Response:
        return _page(viewer.calibration_page())

    return [Route("/", _one_line(runs)), Route("/items", _one_line(items)), Route("/item", _one_line(item)),
            Route("/drift", _one_line(drift)), Route("/live", _one_line(live)), Route("/matrix", _one_line(matrix)),
            Route("/prompt", _one_line(prompt)), Route("/calibration", _one_line(calibration))]


def _label_routes(viewer: Viewer) -> list[Any]:
    """/label (the page), its POSTs (a label, a skip, an undo): 404 when labelling is off."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    def no_labelling() -> Response:
        return PlainTextResponse("labelling is off: start scijudge view with --label-out LABELS.jsonl",
                                 status_code=404)

    def label_get(request: Request) -> Response:
        if viewer.labelling is None:
            return no_labelling()
        nonce = secrets.token_urlsafe(12)
        return _page(viewer.label_page(flash=request.query_params.get("note", "")[:500], nonce=nonce), nonce)

    async def labelling_post(request: Request, act: Callable[[dict[str, Any]], tuple[int, str]]) -> Response:
        """A POST of the labelling page: 404 when labelling is off, 400 for a body that is not a JSON object or
        names no unit, else ``act``'s (status, message) as JSON."""
        if viewer.labelling is None:
            return no_labelling()
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        try:
            status, message = await run_in_threadpool(act, body)
        except InputError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        return JSONResponse({"message": message}, status_code=status)

    async def label_post(request: Request) -> Response:
        return await labelling_post(request, viewer.add_label)

    async def skip(request: Request) -> Response:
        return await labelling_post(request, viewer.skip)

    async def undo(request: Request) -> Response:
        if viewer.labelling is None:
            return no_labelling()
        try:
            removed = await run_in_threadpool(viewer.undo)
        except LabelWriteError as exc:
            return PlainTextResponse(str(exc), status_code=exc.status)
        if "application/json" not in request.headers.get("content-type", ""):  # the plain form: back to the page
            return RedirectResponse("/label", status_code=303)
        return JSONResponse({"removed": removed})

    async def _json_body(request: Request) -> dict[str, Any] | Response:
        try:
            body = await request.json()
        except ValueError:
            return PlainTextResponse("expected a JSON object", status_code=400)
        return body if isinstance(body, dict) else PlainTextResponse("expected a JSON object", status_code=400)

    return [Route("/label", _one_line(label_get), methods=["GET"]), Route("/label", label_post, methods=["POST"]),
            Route("/label/skip", skip, methods=["POST"]), Route("/label/undo", undo, methods=["POST"])]


class TokenGate:
    """ASGI middleware: every HTTP request carries the token (query once, then the cookie) or is refused."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie_name(token)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from starlette.requests import Request
        from starlette.responses import PlainTextResponse, RedirectResponse

        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None:
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                await PlainTextResponse("scijudge view: wrong token", status_code=403)(scope, receive, send)
                return
            if request.method == "GET":  # set the cookie, and take the token out of the address bar
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = quote(request.url.path) + ("?" + urlencode(rest) if rest else "")
                response = RedirectResponse(target, status_code=303)
                response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
                await response(scope, receive, send)
                return
        else:
            cookie = request.cookies.get(self.cookie)
            if cookie is None:
                await PlainTextResponse("scijudge view: open the URL with the ?token= that the command printed",
                                        status_code=401)(scope, receive, send)
                return
            if not secrets.compare_digest(cookie.encode(), self.token.encode()):
                await PlainTextResponse("scijudge view: wrong token", status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def make_viewer(runs: Sequence[Path], *, labels: Sequence[Path] = (), picks: Sequence[Path] = (),
                label_out: Path | None = None, annotator: str = "", items: Sequence[Path] | None = None,
                judges: Sequence[str] | None = None, token: str | None = None) -> Viewer:
    """A viewer over the stores: checks every file named now (one clear error), opens nothing for writing but
    the label file."""
    from scijudge.view.items import ItemIndex
    from scijudge.view.stores import StoreView

    view = StoreView(runs)
    for path in labels:
        if not Path(path).is_file():
            raise InputError("labels file not found", file=path)
    for path in picks:
        if not Path(path).is_file():
            raise InputError("picks file not found", file=path)
    if picks and label_out is None:  # the picks order the /label queue only: never ignored in silence
        raise InputError("--picks orders the items to label at /label: add --label-out FILE", field="picks")
    items_files = list(items) if items is not None else recorded_items(view)
    if label_out is not None:
        refuse_input_as_output(Path(label_out), [*runs, *labels, *picks, *items_files])
    site = Site(view=view, items=ItemIndex(items_files),
                label_paths=[Path(p) for p in labels], label_out=Path(label_out) if label_out is not None else None)
    if site.label_files():
        site.refresh_labels()  # every labels file read (and checked) now: a bad line is one error before serving
    labelling = None
    if label_out is not None:
        queue = Queue(view, [Path(p) for p in picks], judges)
        labelling = Labelling(file=LabelFile(label_out, annotator), queue=queue)
    viewer = Viewer(site, token or secrets.token_urlsafe(24), labelling)
    site.scale = lambda judge: viewer.scale_of(judge)[:2]
    return viewer


def refuse_input_as_output(out: Path, inputs: Sequence[Path]) -> None:
    """Refuse an output that is one of the inputs, by file identity (a hard link, a symlink or another spelling of
    the same path included; a store's ``-wal`` and ``-shm`` too)."""
    import os

    named = [*inputs, *(Path(str(p) + suffix) for p in inputs for suffix in ("-wal", "-shm"))]
    for path in named:
        same = Path(out).resolve() == Path(path).resolve()
        if not same and Path(out).exists() and Path(path).exists():
            same = os.path.samefile(out, path)
        if same:
            raise InputError(f"--label-out must be a new file or a label file of its own, not the input {path}",
                             file=out)


def recorded_items(view: Any) -> list[Path]:
    """The items files the stores recorded (``scijudge judge`` and ``demo`` write their path) that still exist."""
    found: list[Path] = []
    for store, meta in zip(view.paths, view.meta()):
        recorded = meta.get("items")
        if isinstance(recorded, str) and recorded:
            path = Path(recorded)
            if not path.is_absolute():
                path = path if path.is_file() else store.parent / path
            if path.is_file() and path.resolve() not in {p.resolve() for p in found}:
                found.append(path)
    return found
