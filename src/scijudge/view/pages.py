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

from scijudge.view.items import ItemIndex
from scijudge.view.labelling import Unit, read_label_lines, unit_of
from scijudge.view.stores import SORTS, Filters, StoreView

NAV = (("runs", "Runs"), ("items", "Items"), ("calibration", "Calibration"), ("label", "Label"))


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
                             autoescape=True, undefined=jinja2.ChainableUndefined)
    env.globals.update(num=_num, money=_money, prob_rows=_prob_rows)
    return env


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (int, float)):
        return f"{value:.3g}" if isinstance(value, float) and not float(value).is_integer() else f"{value:g}"
    return str(value)


def _money(value: Any) -> str:
    return "" if value is None else f"${value:.4f}"


def _prob_rows(probs: Any) -> list[tuple[str, float]]:
    """A stored rating distribution as (level, probability) rows in scale order (bad entries left out)."""
    rows = []
    for level, p in (probs or {}).items() if isinstance(probs, dict) else ():
        try:
            rows.append((float(level), str(level), float(p)))
        except (TypeError, ValueError):
            continue
    return [(text, p) for _, text, p in sorted(rows)]


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
    def runs_page(self, links: Links) -> str:
        labels_text = f"labels: {', '.join(p.name for p in self.label_files())}" if self.label_files() else ""
        return self.render("runs.html", links, "runs", "Runs", rows=self.view.summary(), labels_text=labels_text,
                           drift_names=" and ".join(self.store_names[:2]) if len(self.view.paths) >= 2 else "")

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

    def items_page(self, links: Links, filters: Filters, *, sort: str, descending: bool, page: int) -> str:
        has_labels = bool(self.label_files())
        if has_labels:
            self.refresh_labels()
        found = self.view.page(filters, sort=sort, descending=descending, page=page)
        params = {"judge": filters.judge, "model": filters.model, "status": filters.status, "min": filters.score_min,
                  "max": filters.score_max, "q": filters.text, "sort": sort, "desc": "1" if descending else None}
        return self.render("items.html", links, "items", "Items", page=found, f=filters, sort=sort, desc=descending,
                           sorts=list(SORTS), choices=self.view.choices(), has_labels=has_labels,
                           page_url=lambda n: links.page_url(n, params))

    def known(self, item_id: str) -> bool:
        """The item has a judgment in the stores or a line in the items files (else its page is a 404)."""
        return bool(self.view.judges_of(item_id)) or self.items.has(item_id)

    def item_page(self, links: Links, item_id: str) -> str:
        inputs = self.items.get(item_id)
        labels = [x for x in self.refresh_labels() if str(x.get("item_id")) == item_id] if self.label_files() else []
        return self.render("item.html", links, "items", f"Item {item_id}", item=inputs if isinstance(inputs, list) else None,
                           no_item=inputs if isinstance(inputs, str) else "", judgments=self.view.item(item_id),
                           labels=labels, hide=False)
