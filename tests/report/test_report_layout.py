"""The calibration report says 'tie' and 'no significant difference', has no empty sections or degenerate bars,
prints counts as integers, and its verdict and key table fit 1,200 px in a real headless Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scijudge.metrics.calibration import calibrate
from scijudge.report.calibration import render_html
from scijudge.report.summary import verdict_sentence, verdict_summary

JUDGE = "yescieval.qa.correctness"


def _inputs(n: int = 40, tie: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    h = rng.integers(1, 6, n).astype(float)
    rows = []
    for model, noise in (("model-a", 1), ("model-b", 1 if tie else 2)):
        j = h.copy() if tie else np.clip(h + rng.integers(-noise, noise + 1, n), 1, 5)
        rows += [{"item_id": f"q{i}", "judge": JUDGE, "part": "", "family": "likert", "spec_hash": "s",
                  "model": model, "status": "ok", "score": j[i], "verdict": None, "confidence": None,
                  "probs": None, "source": ""} for i in range(n)]
    labels = pd.DataFrame({"item_id": [f"q{i}" for i in range(n)], "judge": JUDGE, "score": h})
    return pd.DataFrame(rows), labels


def test_exact_ties_are_reported_as_ties() -> None:
    judgments, labels = _inputs(tie=True)
    result = calibrate(judgments, labels, n_boot=200)
    (row,) = [r for _, r in verdict_summary(result).iterrows()]
    sentence = verdict_sentence(row)
    assert "tie between" in sentence and "ahead" not in sentence and "no significant difference" in sentence
    assert set(result.paired["better"]) == {"tie"}
    page = render_html(result)
    assert "Reliability diagrams" not in page  # no judgment has a confidence: no empty section
    assert "<td>40</td>" in page and "40.000" not in page  # counts as integers


def test_no_winner_without_significance() -> None:
    judgments, labels = _inputs(n=12)
    result = calibrate(judgments, labels, n_boot=200)
    insignificant = result.paired[result.paired["p_holm"] >= 0.05]
    assert len(insignificant) and set(insignificant["better"]) <= {"no significant difference", "tie"}


def _chromium() -> str | None:
    return next((found for name in ("chromium", "chromium-browser", "google-chrome", "chrome")
                 if (found := shutil.which(name))), None)


@pytest.mark.slow
@pytest.mark.needs_extra("chromium")
def test_verdict_and_key_table_fit_1200px_in_headless_chromium(tmp_path: Path) -> None:
    judgments, labels = _inputs()
    page = render_html(calibrate(judgments, labels, n_boot=200))
    probe = """<script>
    const box = (sel) => { const e = document.querySelector(sel); if (!e) return null;
      const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top}; };
    document.body.setAttribute('data-probe', JSON.stringify({
      scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
      verdict: box('#verdict'), key: box('#leaderboard-key')}));
    </script>"""
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    done = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
                           "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-probe="([^"]+)"', done.stdout)
    assert found, done.stderr[-2000:]
    probe_data = json.loads(html.unescape(found.group(1)))
    assert probe_data["client"] <= 1200 and probe_data["scroll"] <= probe_data["client"]  # no horizontal scroll
    for name in ("verdict", "key"):
        assert probe_data[name] is not None, name
        assert probe_data[name]["left"] >= 0 and probe_data[name]["right"] <= probe_data["client"], name
