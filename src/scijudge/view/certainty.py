"""The label page's stop: each judge's anytime-valid interval above the queue, and the queue closed with
"certain enough: ±W at 90%" once every judge's confidence sequence is ``target_width`` wide
(``estimation.sequential.certainty``: the numbers are estimate --sequential's, never a second copy)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from scijudge.view.app import Viewer


class Certainty:
    """The stop rule of one viewer: the judgments read once per change of the stores, the answer once per change
    of the labels."""

    def __init__(self, viewer: Viewer, target_width: float, alpha: float = 0.1,
                 judges: list[str] | None = None, start: int | None = None) -> None:
        from scijudge.estimation.anytime import DEFAULT_START

        self.viewer, self.target_width, self.alpha, self.judges = viewer, target_width, alpha, judges
        self.start = DEFAULT_START if start is None else start
        self._lock = threading.Lock()
        self._frame: tuple[Any, Any] | None = None  # (store stats, judgments)
        self._answer: tuple[Any, tuple[list[str], str | None]] | None = None

    def _judgments(self) -> Any:
        import pandas as pd

        from scijudge.run.store import Run

        paths: list[Path] = list(self.viewer.site.view.paths)
        stats = tuple((p, p.stat().st_mtime_ns, p.stat().st_size) for p in paths)
        if self._frame is None or self._frame[0] != stats:
            frames = []
            for p in paths:
                with Run(p, create=False) as store:
                    frames.append(store.to_pandas().assign(source=p.stem))
            from scijudge.vocab import VARIANT_ID

            frame = pd.concat(frames, ignore_index=True)
            frame = frame[~frame["item_id"].astype(str).str.match(VARIANT_ID.pattern)]  # perturbed variants
            self._frame = (stats, frame)
        return self._frame[1]

    def status(self, labels: list[dict[str, Any]]) -> tuple[list[str], str | None]:
        """(one line per judge, the stop line or None) for these labels."""
        from scijudge.estimation.sequential import certainty

        key = tuple((x.get("item_id"), x.get("judge"), x.get("part"), x.get("score"), x.get("labelled_at"))
                    for x in labels)
        with self._lock:
            judgments = self._judgments()
            if self._answer is None or self._answer[0] != (key, id(judgments)):
                answer = certainty(judgments, labels, target_width=self.target_width, alpha=self.alpha,
                                   judges=self.judges, start=self.start)
                self._answer = ((key, id(judgments)), answer)
            return self._answer[1]

    def install(self) -> None:
        """Show the intervals above the queue and stop it when certain enough."""
        self.viewer.stop_rules.append(lambda labels: "; ".join(self.status(labels)[0]) or None)
        self.viewer.stop_queue = lambda labels: self.status(labels)[1]
        if self.viewer.labelling is not None:  # the sequence is valid for labels in a random order
            self.viewer.labelling.queue.shuffled = True
