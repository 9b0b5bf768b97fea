"""``scijudge view RUN... --export DIR``: the viewer as a self-contained, read-only static site (no server, no
script, no file from outside): the runs page, the items table in pages (in the order stored), one page per item
and, with labels, the calibration page and the drift page. Pages are written to a temporary folder that is renamed
to ``DIR`` at the end, so a failed export leaves nothing half-written; an existing ``DIR`` is refused."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from urllib.parse import quote

from scijudge.errors import InputError
from scijudge.view.pages import Links, Site
from scijudge.view.stores import Filters


def item_file(item_id: str) -> str:
    """An item page's file name: a hash of the id (ids may hold any character; file names may not)."""
    return "item-" + hashlib.sha256(item_id.encode()).hexdigest()[:20] + ".html"


def static_links() -> Links:
    files = {"runs": "index.html", "items": "items-1.html", "calibration": "calibration.html",
             "drift": "drift.html", "label": "index.html", "matrix": "matrix.html"}
    return Links(url=lambda key: files[key], item_url=lambda item_id: "items/" + quote(item_file(item_id)),
                 page_url=lambda n, params: f"items-{n}.html")


def _item_links() -> Links:
    """Links from a page under ``items/``: one folder up."""
    inner = static_links()
    return Links(url=lambda key: "../" + inner.url(key), item_url=lambda item_id: quote(item_file(item_id)),
                 page_url=lambda n, params: f"../items-{n}.html")


def export_site(site: Site, out: Path, *, n_boot: int = 1000) -> dict[str, int]:
    """Write the site to ``out`` (a new folder); returns the pages written by kind."""
    out = Path(out)
    if out.exists():
        raise InputError("the export folder exists already: give a new one", file=out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=out.name + ".", suffix=".tmp"))
    try:
        counts = _write(site, tmp, n_boot)
        os.chmod(tmp, stat.S_IMODE((tmp / "items").stat().st_mode))  # mkdtemp's 0700: the mode mkdir gives instead
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts


def _write(site: Site, tmp: Path, n_boot: int) -> dict[str, int]:
    site.static = True
    links = static_links()
    counts = {"items pages": 0, "item pages": 0}
    (tmp / "items").mkdir()
    (tmp / "index.html").write_text(site.runs_page(links), encoding="utf-8")
    (tmp / "matrix.html").write_text(site.matrix_page(links, None, "spread", 1), encoding="utf-8")
    first = site.view.page(Filters(), page=1)
    for number in range(1, first.pages + 1):
        (tmp / f"items-{number}.html").write_text(
            site.items_page(links, Filters(), sort="stored", descending=False, page=number), encoding="utf-8")
        counts["items pages"] += 1
    inner = _item_links()
    seen: set[str] = set()
    for item_id, _judge, _part in site.view.units():
        if item_id in seen:
            continue
        seen.add(item_id)
        (tmp / "items" / item_file(item_id)).write_text(site.item_page(inner, item_id), encoding="utf-8")
        counts["item pages"] += 1
    if len(site.view.paths) >= 2:
        (tmp / "drift.html").write_text(site.drift_page(links), encoding="utf-8")
    files = [p for p in site.label_files() if p.exists() and p.stat().st_size]
    if files:
        from scijudge.view.figures import calibration_page

        text = calibration_page(site.view.paths, files, None, n_boot=n_boot)
        (tmp / "calibration.html").write_text(
            text.replace("<body>", "<body><p><a href='index.html'>← back</a></p>", 1), encoding="utf-8")
    else:
        (tmp / "calibration.html").write_text(site.render(
            "message.html", links, "calibration", "Calibration",
            message="No labels were given to the export (--labels)."), encoding="utf-8")
    return counts
