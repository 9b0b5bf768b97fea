"""Every design is checked before it runs: the residual model's uncertainty like any other source (cross-fitted),
an explicit design without enough labels gives way to uniform picks, and the check does not move with last-bit
rounding of tied residuals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scijudge.estimation.select import select_labels, uncertainty_check


def test_the_check_is_the_same_under_last_bit_noise_of_tied_residuals() -> None:
    rng = np.random.default_rng(4)
    f = rng.integers(1, 6, 40).astype(float)
    y = np.clip(f + rng.integers(-1, 2, 40), 1, 5)
    u = rng.integers(0, 3, 40).astype(float)
    base = uncertainty_check(u, y, f)
    for _ in range(20):  # nudge every value by one ulp either way: the decision and rho stay
        jitter = np.where(rng.random(40) < 0.5, np.nextafter(y, np.inf), np.nextafter(y, -np.inf))
        again = uncertainty_check(np.nextafter(u, np.inf), jitter, f)
        assert again[0] == base[0] and again[1] == base[1]


def test_residual_uncertainty_is_checked_and_explicit_designs_need_labels() -> None:
    rng = np.random.default_rng(7)
    ids = [f"i{k:03d}" for k in range(200)]
    score = rng.integers(1, 6, 200).astype(float)
    judgments = pd.DataFrame({"item_id": ids, "judge": "j", "score": score})
    human = np.clip(score + rng.normal(0, 1, 200), 1, 5)  # errors unrelated to the score: nothing to rank
    labels = {ids[k]: float(human[k]) for k in range(40)}
    picks = select_labels(judgments, judge="j", budget=40, strategy="uncertainty", labels=labels)
    assert set(picks["design"]) == {"uniform"}
    assert any("residual model cross-fitted" in n or "planner expects" in n for n in picks.attrs["notes"])
    few = select_labels(judgments, judge="j", budget=40, strategy="uncertainty",
                        labels=dict(list(labels.items())[:6]))
    assert set(few["design"]) == {"uniform"} and "a design runs only after a check" in few.attrs["notes"][0]
    forced = select_labels(judgments, judge="j", budget=40, strategy="uncertainty", labels=labels, check=False)
    assert set(forced["design"]) == {"uncertainty"}


def test_picks_do_not_depend_on_the_order_of_the_judgment_rows() -> None:
    """The same judgments in another row order (another store concatenation, a sorted frame) give the same picks:
    the design draws over the sorted item ids, not over the frame's positions."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"item_id": [f"i{k:02d}" for k in range(40)], "judge": "j", "model": "m", "status": "ok",
                          "score": rng.integers(1, 6, 40).astype(float)})
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    for strategy, strata in (("uniform", None), ("stratified", {f"i{k:02d}": "ab"[k % 2] for k in range(40)})):
        a = select_labels(frame, judge="j", budget=12, strategy=strategy, seed=5, strata=strata, check=False)
        b = select_labels(shuffled, judge="j", budget=12, strategy=strategy, seed=5, strata=strata, check=False)
        picked_a = set(a.loc[a["picked"], "item_id"])
        assert picked_a == set(b.loc[b["picked"], "item_id"]) and len(picked_a) > 0


def test_a_python_caller_is_told_its_own_keyword_and_the_command_line_its_option() -> None:
    """``select_labels(tau=0)`` names ``tau`` (the keyword the caller typed), not ``--floor``; the command line turns
    the same error into its option, renamed where the two differ."""
    import pytest

    from scijudge.cli import _flag_of, _option_flags
    from scijudge.commands.select_labels import select_labels_cmd
    from scijudge.errors import InputError

    frame = pd.DataFrame({"item_id": [f"i{k}" for k in range(10)], "judge": "j", "score": 3.0})
    for kwargs, field in (({"budget": 0}, "budget"), ({"budget": 3, "tau": 0.0}, "tau"),
                          ({"budget": 3, "strategy": "bogus"}, "strategy"), ({"budget": 3, "judge": "k"}, "judge")):
        with pytest.raises(InputError) as caught:
            select_labels(frame, **{"judge": "j", **kwargs})
        assert caught.value.field == field and "--" not in str(caught.value)
    flags = _option_flags(select_labels_cmd)
    assert [_flag_of(f, flags) for f in ("budget", "tau", "width", "strategy", "--judge")] == \
        ["--budget", "--floor", "--target-width", "--strategy", "--judge"]
