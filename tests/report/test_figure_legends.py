"""The calibration figures keep their legends off the plotted area (the legend's box, as drawn, meets no panel's box)
and their small multiples wrap at three panels a row, so the figures show unscaled on a 1,400 px screen."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from scijudge.metrics.calibration import calibrate

JUDGE = "yescieval.qa.correctness"
pytestmark = pytest.mark.slow  # a calibration with its bootstrap and three figures drawn: seconds


def _inputs(n: int = 40, models: int = 4) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(1)
    human = rng.integers(1, 6, n).astype(float)
    rows = []
    for m in range(models):
        score = np.clip(human + rng.integers(-1, 2, n), 1, 5)
        for i in range(n):
            probs = {str(k): (0.6 if k == score[i] else 0.1) for k in range(1, 6)}
            rows.append({"item_id": f"q{i}", "judge": JUDGE, "part": "", "family": "likert", "spec_hash": "s",
                         "model": f"model-{m}", "status": "ok", "score": score[i], "verdict": None,
                         "confidence": None, "probs": probs, "source": ""})
    return pd.DataFrame(rows), pd.DataFrame({"item_id": [f"q{i}" for i in range(n)], "judge": JUDGE, "score": human})


@pytest.fixture(scope="module")
def drawn() -> dict[str, Any]:
    """Each figure of the report, drawn, by the function that made it (``png_uri`` intercepted)."""
    import inspect

    from scijudge.report import calibration as report

    judgments, labels = _inputs()
    result = calibrate(judgments, labels, n_boot=50)
    figures: dict[str, Any] = {}
    real = report.png_uri

    def keep(fig: Any) -> str:
        fig.canvas.draw()
        figures[inspect.stack()[1].function] = {
            "size": fig.get_size_inches() * fig.dpi,
            "legends": [lg.get_window_extent() for lg in [*fig.legends, *(a.get_legend() for a in fig.axes)] if lg],
            "panels": [a.get_window_extent() for a in fig.axes if a.get_visible()]}
        return real(fig)

    original, report.png_uri = report.png_uri, keep
    try:
        report.render_html(result)
    finally:
        report.png_uri = original
    return figures


@pytest.mark.parametrize("figure", ["forest_plot", "reliability_plot"])
def test_legends_meet_no_panel(drawn: dict[str, Any], figure: str) -> None:
    found = drawn[figure]
    assert found["legends"], f"{figure} has no legend"
    for legend in found["legends"]:
        for panel in found["panels"]:
            assert not legend.overlaps(panel), (figure, legend, panel)


def test_small_multiples_fit_1400_px(drawn: dict[str, Any]) -> None:
    for figure in ("confusion_plot", "reliability_plot"):  # four contenders: two rows of at most three panels
        width, _height = drawn[figure]["size"]
        assert len(drawn[figure]["panels"]) == 4 and width <= 1360, (figure, width)
