"""The label page needs no calibration stack: in a fresh interpreter, a viewer with --labels and --label-out serves
/label (its scales resolved as calibrate resolves them) without importing scipy, scikit-learn or
``scijudge.metrics.calibration``; the calibration page then imports them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter

SCRIPT = r'''
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from _view_world import J1, make_world
from starlette.testclient import TestClient
from scijudge.view.app import build_app, make_viewer

world = make_world(Path(sys.argv[1]))
viewer = make_viewer([world.store], labels=[world.labels], label_out=Path(sys.argv[1]) / "new.jsonl", token="t")
client = TestClient(build_app(viewer))
client.get("/?token=t")
page = client.get("/label")
assert page.status_code == 200 and "id=\"unit-judge\"" in page.text, page.text[:300]
assert viewer.scale_of(J1) == (1.0, 5.0, 1.0)
heavy = sorted(m for m in ("scipy", "sklearn", "statsmodels", "scijudge.metrics.calibration") if m in sys.modules)
print("heavy:", ",".join(heavy))
viewer.n_boot = 20
assert client.get("/calibration").status_code == 200
print("after calibration:", "scijudge.metrics.calibration" in sys.modules)
'''


def test_the_label_page_imports_no_calibration_stack(tmp_path: Path) -> None:
    here = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(here)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "heavy: \n" in done.stdout and "after calibration: True" in done.stdout, done.stdout
