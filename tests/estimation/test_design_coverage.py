"""Coverage and width of the label designs in simulations with known truth (vectorised over repetitions).

Scenario A: the judge's reported uncertainty tracks its error (informative); B: recorded-like ordinal ratings
(1-5 by 3 crowd raters, averaged; the judge gives a rating distribution). 90% intervals must cover in [0.88, 0.92]
(2,000 repetitions: the binomial standard error is 0.007), and where uncertainty is informative the uncertainty
design's mean width must be at most 0.85x uniform PPI++ at the same expected budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from scijudge.estimation import active as A
from scijudge.estimation import designs as D

pytestmark = pytest.mark.slow

ALPHA = 0.1
TAU = 0.1


def rows_uncertainty_pi(u: np.ndarray, n: int) -> np.ndarray:
    return np.stack([D.uncertainty_pi(row, n, power=0.5, tau=TAU) for row in u])


def rows_stratified(codes: np.ndarray, n: int, rng: np.random.Generator, scale_from: np.ndarray | None = None,
                    ) -> np.ndarray:
    """Per repetition: allocation (Neyman with S_h = mean of ``scale_from`` in the stratum, else proportional)
    and an SRS of n_h items per stratum."""
    xi = np.zeros(codes.shape, bool)
    for r in range(codes.shape[0]):
        c = codes[r]
        scale = None
        if scale_from is not None:
            scale = {str(h): float(scale_from[r][c == h].mean()) for h in range(int(c.max()) + 1)}
        _, c2, alloc = D.stratified_pi(c, n, scale=scale)
        xi[r] = D.stratified_draw(c2, list(alloc.values()), rng)
    return xi


def summarise(name: str, theta: np.ndarray, se: np.ndarray, truth: float | np.ndarray, n_lab: np.ndarray,
              table: list[dict]) -> None:
    z = A.z_value(ALPHA)
    ok = np.isfinite(theta)
    cover = np.abs(theta - truth) <= z * se
    table.append({"design": name, "reps": int(ok.sum()), "coverage": float(cover[ok].mean()),
                  "mean_width": float((2 * z * se)[ok].mean()), "mean_labels": float(np.mean(n_lab)),
                  "bias": float(np.mean((theta - truth)[ok]))})


def scenario_a(rng: np.random.Generator, reps: int, big_n: int, n: int, informative: bool, chunk: int = 250):
    offsets = np.array([-0.5, 0.0, 0.5])
    domain = np.arange(big_n) % 3
    truth = 3.0 + float(offsets[domain].mean())
    acc: dict[str, list] = {}

    def add(key, *vals):
        acc.setdefault(key, []).append(vals)

    for start in range(0, reps, chunk):
        r = min(chunk, reps - start)
        mu = 3.0 + offsets[domain][None, :] + rng.normal(0, 0.6, (r, big_n))
        sigma = 0.35 * np.exp(0.8 * rng.normal(size=(r, big_n)))
        y = mu + sigma * rng.normal(size=(r, big_n))
        f = mu + 0.3 + rng.normal(0, 0.15, (r, big_n))
        u = sigma**2 * np.exp(0.3 * rng.normal(size=(r, big_n)))
        if not informative:
            u = rng.permuted(u, axis=1)
        pi_uni = np.full((r, big_n), n / big_n)
        xi = rng.random((r, big_n)) < pi_uni
        t, s, _, nl = A.ppi_core(f, xi, ~xi, y)
        add("uniform PPI++", t, s, xi.sum(1))
        t, s, _ = A.active_core(f, xi, y, pi_uni)
        add("uniform, active estimator", t, s, xi.sum(1))
        pi_u = rows_uncertainty_pi(u, n)
        xi_u = rng.random((r, big_n)) < pi_u
        t, s, _ = A.active_core(f, xi_u, y, pi_u)
        add("uncertainty sqrt(u), Hajek", t, s, xi_u.sum(1))
        t, s, _ = A.active_core(f, xi_u, y, pi_u, weighting="ht")
        add("uncertainty sqrt(u), HT", t, s, xi_u.sum(1))
        t, s, _ = A.active_core(f, xi_u, y, pi_u, lam=0.0)
        add("uncertainty, human-only IPW", t, s, xi_u.sum(1))
        codes = np.stack([D.uncertainty_strata(row, 4) for row in u])
        xi_s = rows_stratified(codes, n, rng, scale_from=np.sqrt(u))
        t, s, _ = A.stratified_core(f, xi_s, y, codes)
        add("stratified 4 u-bins, Neyman", t, s, xi_s.sum(1))
        dcodes = np.broadcast_to(domain, (r, big_n))
        xi_d = rows_stratified(dcodes, n, rng)
        t, s, _ = A.stratified_core(f, xi_d, y, dcodes)
        add("stratified domain, proportional", t, s, xi_d.sum(1))
    table: list[dict] = []
    for key, vals in acc.items():
        th = np.concatenate([v[0] for v in vals])
        se = np.concatenate([v[1] for v in vals])
        nl = np.concatenate([v[2] for v in vals])
        summarise(key, th, se, truth, nl, table)
    return table


def scenario_paired(rng: np.random.Generator, reps: int, big_n: int, n: int):
    q = rng.normal(3.0, 0.7, (reps, big_n))
    sa = 0.3 * np.exp(0.8 * rng.normal(size=(reps, big_n)))
    sb = 0.3 * np.exp(0.8 * rng.normal(size=(reps, big_n)))
    ya = q + 0.2 + sa * rng.normal(size=q.shape)
    yb = q + sb * rng.normal(size=q.shape)
    fa = q + 0.2 + 0.3 + rng.normal(0, 0.15, q.shape)
    fb = q + 0.1 + rng.normal(0, 0.15, q.shape)
    u = (sa**2 + sb**2) * np.exp(0.3 * rng.normal(size=q.shape))
    truth = 0.2
    table: list[dict] = []
    pi = np.full(q.shape, n / big_n)
    xi = rng.random(q.shape) < pi
    t, s, _, _ = A.ppi_core(fa - fb, xi, ~xi, ya - yb)
    summarise("paired: uniform PPI++", t, s, truth, xi.sum(1), table)
    pi_u = rows_uncertainty_pi(u, n)
    xi_u = rng.random(q.shape) < pi_u
    t, s, _ = A.active_core(fa - fb, xi_u, ya - yb, pi_u)
    summarise("paired: uncertainty, Hajek", t, s, truth, xi_u.sum(1), table)
    jo = (fa - fb).mean(1)
    jse = (fa - fb).std(1) / np.sqrt(big_n)
    summarise("paired: judge-only", jo, jse, truth, np.zeros(reps), table)
    return table


LEVELS = np.arange(1.0, 6.0)


def ordinal_population(rng: np.random.Generator, shape: tuple[int, ...]):
    q = rng.normal(3.0, 0.9, shape)
    amb = 0.3 * np.exp(0.6 * rng.normal(size=shape))
    ratings = []
    for _ in range(3):
        lenient = rng.normal(0, 0.25, shape)
        ratings.append(np.clip(np.rint(q + lenient + amb * rng.normal(size=shape)), 1, 5))
    y = np.mean(ratings, axis=0)
    seen = q + 0.25 + rng.normal(0, 0.3, shape) + amb * rng.normal(0, 0.5, shape)
    temp = 0.3 + 0.8 * amb * np.exp(0.25 * rng.normal(size=shape))
    logits = -((LEVELS - seen[..., None]) ** 2) / (2 * temp[..., None] ** 2)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    f = p @ LEVELS
    u = np.maximum(p @ LEVELS**2 - f**2, 0.0)
    mode = p.argmax(-1)
    return y, f, u, mode


def scenario_ordinal(rng: np.random.Generator, reps: int, big_n: int, n: int):
    truth = float(np.mean(ordinal_population(np.random.default_rng(999), (400_000,))[0]))
    table: list[dict] = []
    acc: dict[str, list] = {}
    for start in range(0, reps, 250):
        r = min(250, reps - start)
        y, f, u, mode = ordinal_population(rng, (r, big_n))
        pi = np.full(y.shape, n / big_n)
        xi = rng.random(y.shape) < pi
        acc.setdefault("ordinal: uniform PPI++", []).append((*A.ppi_core(f, xi, ~xi, y)[:2], xi.sum(1)))
        pi_u = rows_uncertainty_pi(u, n)
        xi_u = rng.random(y.shape) < pi_u
        acc.setdefault("ordinal: uncertainty Var_p, Hajek", []).append(
            (*A.active_core(f, xi_u, y, pi_u)[:2], xi_u.sum(1)))
        codes = np.stack([D.uncertainty_strata(row, 4) for row in u])
        xi_s = rows_stratified(codes, n, rng, scale_from=np.sqrt(u))
        acc.setdefault("ordinal: stratified u-bins, Neyman", []).append(
            (*A.stratified_core(f, xi_s, y, codes)[:2], xi_s.sum(1)))
        mcodes = np.stack([np.unique(row, return_inverse=True)[1] for row in mode])
        xi_m = rows_stratified(mcodes, n, rng)
        acc.setdefault("ordinal: stratified judge mode, proportional", []).append(
            (*A.stratified_core(f, xi_m, y, mcodes)[:2], xi_m.sum(1)))
        acc.setdefault("ordinal: judge-only", []).append((f.mean(1), f.std(1) / np.sqrt(big_n), np.zeros(r)))
    for key, vals in acc.items():
        summarise(key, np.concatenate([v[0] for v in vals]), np.concatenate([v[1] for v in vals]), truth,
                  np.concatenate([v[2] for v in vals]), table)
    return table, truth




def test_every_design_covers_at_its_nominal_rate_and_uncertainty_narrows_the_interval():
    table = {row["design"]: row for row in scenario_a(np.random.default_rng(2024), 2000, 2000, 200, True)}
    for name in ("uniform PPI++", "uniform, active estimator", "uncertainty sqrt(u), Hajek", "uncertainty sqrt(u), HT",
                 "stratified 4 u-bins, Neyman", "stratified domain, proportional"):
        assert 0.88 <= table[name]["coverage"] <= 0.92, (name, table[name])
    ratio = table["uncertainty sqrt(u), Hajek"]["mean_width"] / table["uniform PPI++"]["mean_width"]
    assert ratio <= 0.85, ratio


def test_on_recorded_like_ordinal_ratings_every_design_covers_at_least_085():
    table, _ = scenario_ordinal(np.random.default_rng(7), 600, 1000, 150)
    rows = {row["design"]: row for row in table}
    for name in ("ordinal: uniform PPI++", "ordinal: uncertainty Var_p, Hajek", "ordinal: stratified u-bins, Neyman",
                 "ordinal: stratified judge mode, proportional"):
        assert rows[name]["coverage"] >= 0.85, (name, rows[name])
    assert rows["ordinal: judge-only"]["coverage"] < 0.5, "the judge alone is biased: why labels are needed"
