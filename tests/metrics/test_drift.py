"""Judge drift between two run stores (and inside one store's history), on stores with a known flip rate;
kappa checked against scikit-learn, the mean-shift interval against scipy's paired t-test."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from scijudge.errors import InputError
from scijudge.metrics.drift import cohen_kappa, drift_stores, gate
from scijudge.records import JudgeResult
from scijudge.run.store import Run

N = 200


def known_scores(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """200 scores; exactly 30 changed in the rerun (15%), 10 of them by 2 points (5% beyond +-1)."""
    rng = np.random.default_rng(seed)
    old = rng.integers(1, 6, N).astype(float)
    new = old.copy()
    for n, i in enumerate(rng.choice(N, 30, replace=False)):
        step = 2 if n < 10 else 1
        new[i] = old[i] + step if old[i] + step <= 5 else old[i] - step
    return old, new


def result(i: int, score: float | None, spec: str = "s1") -> JudgeResult:
    return JudgeResult(item_id=f"it{i:03d}", judge="yescieval.qa.cohesion", family="likert", spec_hash=spec,
                       model="gpt-4o", status="ok" if score is not None else "abstained", score=score,
                       reason=None if score is not None else "parse_error")


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("drift")
    old, new = known_scores()
    with Run(base / "old.sqlite") as run:
        for i in range(N):
            run.record(result(i, old[i]))
        run.record(result(999, 3.0))
    with Run(base / "new.sqlite") as run:
        for i in range(N):
            run.record(result(i, new[i]))
        run.record(result(999, None))  # ok -> abstained: counted, not paired
    with Run(base / "both.sqlite") as run:  # one store: the re-judgment has another spec hash, the old row is history
        for i in range(N):
            run.record(result(i, old[i]))
        for i in range(N):
            run.record(result(i, new[i], spec="s2"))
    return base, old, new


def test_flip_rates_kappa_and_mean_shift_on_a_known_drift(two_stores):
    from scipy import stats
    from sklearn.metrics import cohen_kappa_score

    base, old, new = two_stores
    row = drift_stores(base / "old.sqlite", base / "new.sqlite").iloc[0]
    ci = stats.ttest_rel(new, old).confidence_interval(0.95)
    assert row["n_paired"] == N and row["n_matched"] == N + 1 and row["n_status_changed"] == 1
    assert row["flip_rate"] == pytest.approx(30 / N) and row["flip_rate_beyond1"] == pytest.approx(10 / N)
    assert row["kappa"] == pytest.approx(cohen_kappa_score(old, new), abs=1e-12)
    assert row["mean_shift"] == pytest.approx((new - old).mean())
    assert (row["shift_lo"], row["shift_hi"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    assert row["interval"] == "paired t 95%" and row["warning"] == ""


def test_history_inside_one_store_gives_the_same_drift(two_stores):
    from sklearn.metrics import cohen_kappa_score

    base, old, new = two_stores
    row = drift_stores(base / "both.sqlite").iloc[0]
    assert row["n_paired"] == N and row["flip_rate"] == pytest.approx(0.15)
    assert row["kappa"] == pytest.approx(cohen_kappa_score(old, new), abs=1e-12)


def test_reading_does_not_change_the_stores(two_stores):
    base, _, _ = two_stores
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in base.glob("*.sqlite")}
    drift_stores(base / "old.sqlite", base / "new.sqlite")
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in base.glob("*.sqlite")}
    assert after == before


def test_gate_exact_and_beyond1(two_stores):
    base, _, _ = two_stores
    table = drift_stores(base / "old.sqlite", base / "new.sqlite")
    assert len(gate(table, 0.10)) == 1 and gate(table, 0.20) == []
    assert len(gate(table, 0.04, "beyond1")) == 1 and gate(table, 0.06, "beyond1") == []
    with pytest.raises(InputError):
        gate(table, 0.1, "sideways")


def test_kappa_equals_sklearn_on_random_pairs_and_verdicts():
    from sklearn.metrics import cohen_kappa_score

    for s in range(30):
        g = np.random.default_rng(s)
        a, b = g.integers(1, 6, 50), g.integers(1, 6, 50)
        b[:25] = a[:25]
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    va = np.array(["yes", "no", "yes", "yes", "no", "no"], dtype=object)
    vb = np.array(["yes", "no", "no", "yes", "no", "yes"], dtype=object)
    assert cohen_kappa(va, vb) == pytest.approx(cohen_kappa_score(va, vb))


def test_a_store_without_history_and_small_samples_are_said(tmp_path, two_stores):
    base, _, _ = two_stores
    with pytest.raises(InputError, match="no history"):
        drift_stores(base / "old.sqlite")
    with Run(tmp_path / "a.sqlite") as run:
        for i in range(10):
            run.record(result(i, 3.0))
    with Run(tmp_path / "b.sqlite") as run:
        for i in range(10):
            run.record(result(i, 3.0 + (i < 2)))
    row = drift_stores(tmp_path / "a.sqlite", tmp_path / "b.sqlite").iloc[0]
    assert row["flip_rate"] == pytest.approx(0.2) and row["warning"] == "only 10 paired judgments"
