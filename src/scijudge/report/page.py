"""What every HTML report page shares (calibration, estimates, robustness, the viewer's pages): the inline style,
matplotlib set up headless, figures embedded as PNG data URIs, tables and images as HTML. Pages need no network."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

import pandas as pd

from scijudge.report.text import fmt_cell

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em}table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1em}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}.note{color:#666;font-size:.85em}
.scroll{overflow-x:auto}img{max-width:100%;height:auto}details{margin:.5em 0}
table.key td,table.key th{white-space:nowrap}.ci{color:#666;font-size:.8em;display:block}
summary{cursor:pointer;font-weight:600}code{background:#f4f4f4;padding:0 3px}
"""
"""The inline style of every report page."""


def png_uri(fig: Any) -> str:
    """The figure as a PNG data URI (closed afterwards)."""
    import matplotlib.pyplot as plt
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    buffer = io.BytesIO()
    # a constrained layout already fits every label inside the figure: a "tight" box would draw it twice
    constrained = isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)
    fig.savefig(buffer, format="png", dpi=110, bbox_inches=None if constrained else "tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def html_table(frame: pd.DataFrame) -> str:
    """A frame as a scrolling HTML table, each cell formatted as the reports format it."""
    if frame is None or frame.empty:
        return '<p class="note">(none)</p>'
    shown = frame.copy()
    for col in shown.columns:
        shown[col] = shown[col].map(lambda v, c=col: fmt_cell(v, c))
    return '<div class="scroll">' + shown.to_html(index=False, escape=True, border=0) + "</div>"


def html_img(src: str | None, alt: str) -> str:
    """An embedded figure, or a note when there was no data for it."""
    return f'<img src="{src}" alt="{html.escape(alt)}">' if src else '<p class="note">(no data for this plot)</p>'
