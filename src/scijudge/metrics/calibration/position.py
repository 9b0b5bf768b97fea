"""Pairwise judges run in both orders (AB, BA): how often the preference flips with the order, how often
the first slot wins, and agreement with humans once both orders are combined.

Stored pairwise verdicts are already in the item's terms (A = ``answer``, B = ``answer_b``) whatever the
order shown, so an order-consistent judge gives the same verdict for AB and BA. In slot terms, the first
slot holds A in the AB order and B in the BA order. Resolving by both orders keeps a preference both orders
share and calls every disagreement a tie.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from scijudge.vocab import norm_verdict

ORDERS = ("AB", "BA")
COLUMNS = ("contender", "judge", "n_items", "n_both_orders", "flip_rate", "n_decisive", "first_slot_share",
           "first_slot_p", "n_labelled", "agreement_ab", "agreement_ba", "agreement_resolved")


def position_consistency(judgments: pd.DataFrame, verdict_consensus: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per contender × pairwise judge (``prepare_judgments`` rows with normalised verdicts).

    ``first_slot_p`` is the two-sided binomial test of the first-slot share against one half (scipy).
    Agreement columns compare with the human consensus verdict of the item (part ''), where there is one.
    """
    ok = judgments[(judgments["family"] == "pairwise") & judgments["part"].isin(ORDERS)
                   & (judgments["status"] == "ok") & judgments["verdict"].notna()]
    if ok.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    verdict = ok["verdict"].map(norm_verdict)
    first = ((ok["part"] == "AB") & (verdict == "a")) | ((ok["part"] == "BA") & (verdict == "b"))
    decisive = verdict.isin(["a", "b"])
    slots = pd.DataFrame({"contender": ok["contender"], "judge": ok["judge"], "first": first & decisive,
                          "decisive": decisive}).groupby(["contender", "judge"]).sum()
    wide = ok.assign(v=verdict).pivot_table(index=["contender", "judge", "item_id"], columns="part", values="v",
                                           aggfunc="first")
    for order in ORDERS:
        if order not in wide:
            wide[order] = np.nan
    both = wide["AB"].notna() & wide["BA"].notna()
    wide["flip"] = (wide["AB"] != wide["BA"]).where(both)
    wide["resolved"] = wide["AB"].where(wide["AB"] == wide["BA"], "tie").where(both)
    if verdict_consensus is not None and len(verdict_consensus):
        human = verdict_consensus[verdict_consensus["part"] == ""].set_index(["judge", "item_id"])["h_verdict"]
        keys = pd.MultiIndex.from_arrays([wide.index.get_level_values("judge"), wide.index.get_level_values("item_id")])
        wide["human"] = human.reindex(keys).to_numpy()
    else:
        wide["human"] = np.nan
    labelled = wide["human"].notna()
    for name, column in (("agreement_ab", "AB"), ("agreement_ba", "BA"), ("agreement_resolved", "resolved")):
        wide[name] = (wide[column] == wide["human"]).where(labelled & wide[column].notna())
    rows = []
    for (contender, judge), g in wide.groupby(level=["contender", "judge"], sort=True):
        s = slots.loc[(contender, judge)]
        n_dec, n_first = int(s["decisive"]), int(s["first"])
        rows.append({
            "contender": contender, "judge": judge, "n_items": len(g), "n_both_orders": int(g["flip"].notna().sum()),
            "flip_rate": float(g["flip"].mean()) if g["flip"].notna().any() else float("nan"),
            "n_decisive": n_dec, "first_slot_share": n_first / n_dec if n_dec else float("nan"),
            "first_slot_p": float(binomtest(n_first, n_dec, 0.5).pvalue) if n_dec else float("nan"),
            "n_labelled": int(labelled[g.index].sum()),
            **{name: float(g[name].mean()) if g[name].notna().any() else float("nan")
               for name in ("agreement_ab", "agreement_ba", "agreement_resolved")},
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))
