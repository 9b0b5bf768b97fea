"""The viewer's pages, rendered by Jinja2 with autoescaping on: every value from a store, an items file or a labels
file is text in the page (an ``<img onerror>`` in an answer shows as those characters and never runs). The same
renderers serve the live app (``app.py``) and the static export (``export.py``); only the links differ
(``Links``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from scijudge.view.items import ItemIndex
from scijudge.view.labelling import Unit, read_label_lines, unit_of
from scijudge.view.stores import SORTS, Filters, StoreView

NAV = (("runs", "Runs"), ("items", "Items"), ("matrix", "Models"), ("calibration", "Calibration"), ("label", "Label"))
FEW = 30
"""Below this many scores a mean is shown with a warning beside its interval."""
MATRIX_PAGE = 100
MATRIX_SORTS = ("item", "spread", "human")
"""The matrix's orders: stored order by item, the spread between the models' scores, the mean |model - human|."""


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
                             autoescape=True, undefined=jinja2.ChainableUndefined)
    env.globals.update(num=_num, money=_money, prob_rows=_prob_rows, pct=_pct, mean_text=_mean_text,
                       attempts_of=_attempts_of)
    return env


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (int, float)):
        return f"{value:.3g}" if isinstance(value, float) and not float(value).is_integer() else f"{value:g}"
    return str(value)


def _money(value: Any) -> str:
    return "" if value is None else f"${value:.4f}"


def _classical_mean(values: list[float]) -> Any:
    """``estimation.ppi.classical_mean`` (95%) of the scores: ``estimate``'s judge-only estimate."""
    import numpy as np

    from scijudge.estimation.ppi import classical_mean

    return classical_mean(np.asarray(values, dtype=float), 0.05)


def _pct(value: Any) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def _mean_text(row: dict[str, Any]) -> str:
    """A runs row's mean score, its interval and its count (``few`` below ``FEW`` scores)."""
    if row.get("mean") is None:
        return f"— (n={row.get('n_scores', 0)})" if row.get("means", True) else "…"
    interval = f" [{row['lo']:.2f}, {row['hi']:.2f}]" if row.get("lo") is not None else ""
    few = ", few" if row["n_scores"] < FEW else ""
    return f"{row['mean']:.2f}{interval} (n={row['n_scores']}{few})"


_LIVE_CELLS: dict[str, Callable[[dict[str, Any]], str]] = {
    "ok": lambda r: str(r["ok"]), "abstained": lambda r: str(r["abstained"]), "abstention": lambda r: _pct(r["abstention"]),
    "pending": lambda r: str(r["pending"]), "mean": _mean_text, "cost": lambda r: _money(r["cost"]),
    "tokens_in": lambda r: str(r["tokens_in"] or 0), "tokens_out": lambda r: str(r["tokens_out"] or 0),
    "first_at": lambda r: r["first_at"] or "", "last_at": lambda r: r["last_at"] or ""}
"""The runs table's cells as text: rendered in the page and sent by ``/live`` for its script to put in place."""


def _prob_rows(probs: Any) -> list[tuple[str, float]]:
    """A stored rating distribution as (level, probability) rows in scale order (bad entries left out)."""
    rows = []
    for level, p in (probs or {}).items() if isinstance(probs, dict) else ():
        try:
            rows.append((float(level), str(level), float(p)))
        except (TypeError, ValueError):
            continue
    return [(text, p) for _, text, p in sorted(rows)]


def _attempts_of(judgment: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored judgment's attempts (a damaged attempts column: none), each with ``reply``: the model's text as it
    came back, or None where the store kept none (stores written before replies were kept, imports)."""
    attempts = judgment.get("attempts")
    found = [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []
    return [{**a, "reply": a.get("reply") if isinstance(a.get("reply"), str) else None} for a in found]


def _colour(value: Any, lo: float, hi: float) -> str:
    """A cell's background for a score on the scale lo..hi: red (lo) through yellow to green (hi)."""
    if value is None:
        return "#eceff3"
    share = 0.5 if hi <= lo else min(1.0, max(0.0, (float(value) - lo) / (hi - lo)))
    return f"hsl({round(share * 120)}, 65%, 78%)"


@dataclass
class Links:
    """Where the pages point: the live app's routes or the export's files."""

    url: Callable[[str], str]
    item_url: Callable[[str], str]
    page_url: Callable[[int, dict[str, Any]], str]


@dataclass
class Site:
    """What the viewer shows: the stores, the items behind them, the labels given and written."""

    view: StoreView
    items: ItemIndex
    label_paths: Sequence[Path] = ()
    label_out: Path | None = None
    static: bool = False
    scale: Callable[[str], tuple[float, float]] | None = None
    """A judge's scale (lo, hi), for the matrix's colours (the live viewer's resolved scales)."""
    _env: Any = field(default_factory=_env)
    _labels_seen: tuple[Any, ...] | None = None
    _labels: list[dict[str, Any]] | None = None

    @property
    def store_names(self) -> list[str]:
        stems = [p.stem for p in self.view.paths]
        return [p.stem if stems.count(p.stem) == 1 else str(p) for p in self.view.paths]

    def label_files(self) -> list[Path]:
        return [*self.label_paths, *([self.label_out] if self.label_out is not None else [])]

    def labels(self) -> list[dict[str, Any]]:
        """Every label of the labels files, each with the file it came from."""
        found = []
        for path in self.label_files():
            if path == self.label_out:
                read = read_label_lines(path)
            else:  # given labels: read (and checked) as calibrate reads them, CSV too
                from scijudge.labels import load_labels

                read = [label.model_dump() for label in load_labels(path)]
            for label in read:
                label["file"] = path.name
                found.append(label)
        return found

    def refresh_labels(self) -> list[dict[str, Any]]:
        """The labels, read again only when a labels file changed; the human scores go to the SQL view then."""
        files = self.label_files()
        seen = tuple((p, *(lambda s: (s.st_ino, s.st_mtime_ns, s.st_size))(p.stat())) if p.exists() else (p,)
                     for p in files)
        if seen != self._labels_seen or self._labels is None:
            labels = self.labels()
            scores: dict[Unit, list[float]] = {}
            for label in labels:
                if isinstance(label.get("score"), (int, float)) and not isinstance(label.get("score"), bool):
                    scores.setdefault(unit_of(label), []).append(float(label["score"]))
            self.view.set_labels(scores)
            self._labels, self._labels_seen = labels, seen
        return list(self._labels)

    def render(self, template: str, links: Links, active: str, title: str, **values: Any) -> str:
        names = self.store_names
        return self._env.get_template(template).render(
            url=links.url, item_url=links.item_url,
            nav=[n for n in NAV if n[0] != "label" or (self.label_out is not None and not self.static)],
            active=active, title=title, stores=names, stores_text=", ".join(names), static=self.static, **values)

    # --- pages --------------------------------------------------------------------------------------
    def runs_page(self, links: Links, nonce: str = "") -> str:
        labels_text = f"labels: {', '.join(p.name for p in self.label_files())}" if self.label_files() else ""
        # the means read every score and need scipy (seconds to import at start-up): a page whose stores changed
        # since they were last computed shows the counts at once and its script fills the means in from /live
        live = self.live(means=self.static or self.view.cached("scores"))
        return self.render("runs.html", links, "runs", "Runs", rows=live["rows"], progress=live["progress"],
                           labels_text=labels_text, nonce=nonce, few=FEW,
                           drift_names=" and ".join(self.store_names[:2]) if len(self.view.paths) >= 2 else "")

    def live(self, means: bool = True) -> dict[str, Any]:
        """What the runs page shows and its script polls (``/live``): per store, judge and model the counts, the
        mean score with its 95% interval (``estimation.ppi.classical_mean``, the judge-only estimate of
        ``estimate``), the abstention rate, cost and tokens; a progress line per store; the total stored."""
        rows, scores = self.view.summary(), self.view.scores() if means else {}
        names = self.store_names
        for row in rows:
            values = scores.get((row["store"], row["judge"], row["model"]), [])
            mean = _classical_mean(values) if values and means else None
            row.update(store_name=names[row["store"]], n_scores=len(values), means=means,
                       mean=None if mean is None or math.isnan(mean.estimate) else mean.estimate,
                       lo=None if mean is None or math.isnan(mean.lo) else mean.lo,
                       hi=None if mean is None or math.isnan(mean.hi) else mean.hi,
                       abstention=row["abstained"] / (row["ok"] + row["abstained"]) if row["ok"] + row["abstained"]
                       else None,
                       key=f"{row['store']}|{row['judge']}|{row['model']}")
            row["cells"] = {col: text(row) for col, text in _LIVE_CELLS.items()}
        return {"rows": rows, "progress": self._progress(rows), "total": sum(r["ok"] + r["abstained"] for r in rows)}

    def _progress(self, rows: list[dict[str, Any]]) -> list[str]:
        """One line per store: judgments stored, items judged of the items its run recorded, the last one's time,
        and whether a run is writing it now (its writer lock is held)."""
        from scijudge.run import writer_active

        lines = []
        judged = self.view.items_judged()
        metas = self.view.meta()
        for at, (path, name) in enumerate(zip(self.view.paths, self.store_names)):
            mine = [r for r in rows if r["store"] == at]
            stored = sum(r["ok"] + r["abstained"] for r in mine)
            items_file = self.items.for_store(metas[at].get("items"))
            planned = self.items.count(items_file) if items_file is not None else None
            last = max((r["last_at"] or "" for r in mine), default="")
            of = f" of {planned}" if planned else ""
            state = "a run is writing it now" if writer_active(path) else "no run is writing it"
            lines.append(f"{name}: {stored} judgments stored ({sum(r['abstained'] for r in mine)} abstained); "
                         f"{judged.get(at, 0)}{of} items judged; last stored {last or 'never'}; {state}")
        return lines

    def drift_page(self, links: Links) -> str:
        """Drift between the first two stores, as ``scijudge drift A B`` computes it."""
        table, error = self._drift() if len(self.view.paths) >= 2 else ("", "drift needs two run stores")
        return self.render("drift.html", links, "runs", f"Drift between {' and '.join(self.store_names[:2])}",
                           table=table, error=error)

    def _drift(self) -> tuple[str | None, str | None]:
        """Drift between the first two stores (``metrics.drift.drift_stores``, as ``scijudge drift`` computes it)."""
        from scijudge.errors import ScijudgeError
        from scijudge.metrics.drift import drift_stores

        try:
            table = drift_stores(self.view.paths[0], self.view.paths[1])
        except ScijudgeError as exc:
            return "", str(exc)
        return table.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="—", border=0), None

    def items_page(self, links: Links, filters: Filters, *, sort: str, descending: bool, page: int,
                   nonce: str = "") -> str:
        has_labels = bool(self.label_files())
        if has_labels:
            self.refresh_labels()
        found = self.view.page(filters, sort=sort, descending=descending, page=page)
        params = {"judge": filters.judge, "model": filters.model, "status": filters.status, "min": filters.score_min,
                  "max": filters.score_max, "q": filters.text, "sort": sort, "desc": "1" if descending else None}
        kept = {k: v for k, v in params.items() if v not in (None, "")}
        return self.render("items.html", links, "items", "Items", page=found, f=filters, sort=sort, desc=descending,
                           suffix="" if self.static or not kept else "&" + urlencode(kept), nonce=nonce,
                           stored=sum(r["ok"] + r["abstained"] for r in self.view.summary()),
                           sorts=list(SORTS), choices=self.view.choices(), has_labels=has_labels,
                           page_url=lambda n: links.page_url(n, params))

    def matrix_page(self, links: Links, judge: str | None, sort: str, page: int) -> str:
        """Items x models for one judge, cells coloured on the judge's scale (``scale``: (lo, hi)), sorted by item,
        by the spread between the models or by the mean |model - human|."""
        judges = self.view.choices()["judge"]
        judge = judge if judge in judges else (judges[0] if judges else None)
        models, units = self.view.matrix(judge) if judge is not None else ([], [])
        if sort == "spread":
            units.sort(key=lambda u: (u["spread"] is None, -(u["spread"] or 0)))
        elif sort == "human":
            units.sort(key=lambda u: (u["human_gap"] is None, -(u["human_gap"] or 0)))
        pages = max(1, -(-len(units) // MATRIX_PAGE))
        page = min(max(1, page), pages)
        shown = units[(page - 1) * MATRIX_PAGE: page * MATRIX_PAGE]
        scored = [s for u in units for s, _ in u["cells"].values() if s is not None]
        lo, hi = self.scale(judge) if self.scale is not None and judge is not None else \
            ((min(scored), max(scored)) if scored else (0.0, 1.0))
        return self.render("matrix.html", links, "matrix", "Models side by side", judges=judges, judge=judge,
                           models=models, units=shown, sort=sort, sorts=MATRIX_SORTS, page=page, pages=pages,
                           n_units=len(units), colour=lambda v: _colour(v, lo, hi), has_labels=bool(self.label_files()))

    def known(self, item_id: str) -> bool:
        """The item has a judgment in the stores or a line in the items files (else its page is a 404)."""
        return bool(self.view.judges_of(item_id)) or self.items.has(item_id)

    def item_page(self, links: Links, item_id: str, *, neighbours: tuple[str | None, str | None] = (None, None),
                  suffix: str = "", prompt_url: Callable[[dict[str, Any]], str] | None = None) -> str:
        """One item whole: its inputs, labels and every judgment (the stored answer, the chain's attempts, the
        rating probabilities, a link to the prompt); ``neighbours``: the previous and next item along the items
        table's filter (``suffix``: that filter as a query string, kept on their links)."""
        inputs = self.items.get(item_id)
        labels = [x for x in self.refresh_labels() if str(x.get("item_id")) == item_id] if self.label_files() else []
        return self.render("item.html", links, "items", f"Item {item_id}", item=inputs if isinstance(inputs, list) else None,
                           no_item=inputs if isinstance(inputs, str) else "", judgments=self.view.item(item_id),
                           labels=labels, hide=False, prev_item=neighbours[0], next_item=neighbours[1],
                           suffix=suffix, prompt_url=prompt_url)
