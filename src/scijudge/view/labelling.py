"""Labelling from the viewer: the label file (``--label-out``) and the queue of what to label next.

The label file is JSONL that ``load_labels``, ``calibrate`` and ``estimate --picks`` read as it is: one line per
label (``item_id``, ``judge``, ``part``, ``score``, ``annotator``, ``source: "human"``, ``labelled_at``, and the
reviewer's ``comment`` and ``rationale`` when given). A label is appended with one ``write`` under a file lock
(``<label-out>.lock``, the ``filelock`` package: the lock works across
processes and threads), after the file is read again under that lock: a second label by the same annotator for the
same (item, judge, part), from another tab or another viewer on the same file, is refused, so nothing is duplicated
and nothing lost. An undo removes the annotator's last line: the file is rewritten, under the same lock, to a
temporary file that replaces it (every other line kept byte for byte, the file's mode kept), since ``load_labels``
knows no tombstones. A write is all or nothing: on an error (a full disk) the file is cut back to its length before
it, so no torn line is ever left, and the error is a ``LabelWriteError`` (507 for a full disk, 503 otherwise).

The queue is a queue of labelling units, (item, judge, part), as labels are (``load_labels``) and as a cascade
escalates them: the picked units of each ``--picks`` file (``select-labels``' picks.csv, a design over items: each
picked item's judges; or a cascade's escalation queue, which names the judge no member trusted: that unit only),
highest inclusion probability first, and ends there (``estimate --picks`` leaves unpicked labels
out); without picks, every (item, judge, part) the stores judged, in the order stored. A unit somebody has labelled
already is left out, so a restarted viewer resumes where it was. The picks files are read when the queue is first
used (``read_picks`` needs pandas: about a second of imports, after the viewer has started).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scijudge.errors import InputError

class LabelWriteError(Exception):
    """A label could not be written (nothing of it is in the file): the HTTP status and one line for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _write_error(exc: OSError, path: Path) -> LabelWriteError:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return LabelWriteError(507 if full else 503, f"label not written to {path.name}: "
                           f"{exc.strerror or exc}{'; free some space and label again' if full else ''}")


Unit = tuple[str, str, str]
"""(item_id, judge, part): what one label is about."""
LOCK_TIMEOUT_S = 10.0
CLAIM_TTL_S = 1800.0
"""How long a unit shown to one annotator is kept out of the others' queues (an abandoned page frees it then)."""


def read_label_lines(path: Path) -> list[dict[str, Any]]:
    """The label objects of a JSONL file (missing or empty: none), each with its line as ``_line``; a line that is
    not a JSON object is an error naming the file and line."""
    if not path.exists():
        return []
    found = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                raise InputError("not a JSON object", file=path, line=number) from None
            if not isinstance(obj, dict):
                raise InputError("not a JSON object", file=path, line=number)
            obj["_line"] = number
            found.append(obj)
    return found


def unit_of(label: dict[str, Any]) -> Unit:
    return str(label.get("item_id")), str(label.get("judge")), str(label.get("part") or "")


class LabelFile:
    """The ``--label-out`` file of one annotator: add a label, undo the last, read what is there."""

    def __init__(self, path: str | Path, annotator: str) -> None:
        from filelock import FileLock

        self.path = Path(path)
        self.annotator = annotator
        if self.path.is_dir():
            raise InputError("expected a JSONL file for the labels, got a folder", file=self.path)
        if self.path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
            raise InputError("the label file must end in .jsonl (load_labels reads it by its suffix)", file=self.path)
        _check_writable(self.path)  # refused now in one line, not at the first label
        self._threads = threading.Lock()
        self._file_lock = FileLock(str(self.path) + ".lock", timeout=LOCK_TIMEOUT_S)
        self.labels()  # a bad file is refused now, not at the first label

    def _locked(self) -> Any:
        from contextlib import ExitStack

        from filelock import Timeout

        stack = ExitStack()
        stack.enter_context(self._threads)
        try:
            stack.enter_context(self._file_lock)
        except Timeout:
            stack.close()
            raise LabelWriteError(503, f"{self.path.name} is locked by another viewer for over {LOCK_TIMEOUT_S:g} s; "
                                       "try again") from None
        except OSError as exc:
            stack.close()
            raise _write_error(exc, self.path) from None
        return stack

    def labels(self) -> list[dict[str, Any]]:
        return read_label_lines(self.path)

    def add(self, unit: Unit, score: float, *, comment: str = "", rationale: str = "") -> tuple[bool, dict[str, Any]]:
        """Append one label (with the reviewer's comment and rationale, when given); (False, the label already
        there) when this annotator labelled the unit before. Raises ``LabelWriteError`` with nothing written."""
        item_id, judge, part = unit
        with self._locked():
            for label in self.labels():
                if unit_of(label) == unit and label.get("annotator") == self.annotator:
                    return False, label
            label = {"item_id": item_id, "judge": judge, "part": part, "score": score, "annotator": self.annotator,
                     "source": "human", "labelled_at": datetime.now(UTC).isoformat(timespec="seconds"),
                     **({"comment": comment} if comment else {}), **({"rationale": rationale} if rationale else {})}
            self._append((json.dumps(label, ensure_ascii=False) + "\n").encode())
        return True, label

    def _append(self, line: bytes) -> None:
        """Append ``line`` whole, or leave the file as it was (cut back to its length before, on any error)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _write_error(exc, self.path) from None
        try:
            size = os.fstat(fd).st_size
            if size and not _ends_with_newline(self.path):
                line = b"\n" + line  # a hand-edited file without a final newline: keep lines apart
            try:
                while line:  # one write in practice; a short write (a signal, a full disk) goes on from there
                    line = line[os.write(fd, line):]
                os.fsync(fd)
            except OSError as exc:
                try:
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                except OSError:
                    pass
                raise _write_error(exc, self.path) from None
        finally:
            os.close(fd)

    def claim_next(self, choose: Callable[[set[Unit]], QueueEntry | None]) -> QueueEntry | None:
        """The next unit for this annotator, claimed: under the file lock, ``choose`` picks among the units no other
        annotator was shown in the last ``CLAIM_TTL_S`` (``<label-out>.claims.json``), and the pick becomes this
        annotator's one claim. Viewers of several annotators on one label file so share the queue out instead of
        showing the same unit to each; tabs of one annotator show the same unit. Claims only order the queues: a
        claims file that cannot be written leaves them unshared, never a label unwritten."""
        with self._locked():
            now = time.time()
            claims = {k: v for k, v in self._claims().items()
                      if isinstance(v, dict) and isinstance(v.get("at"), (int, float)) and now - v["at"] < CLAIM_TTL_S}
            others = {_unit_of_key(k) for k, v in claims.items() if v.get("annotator") != self.annotator}
            entry = choose(others)
            kept = {k: v for k, v in claims.items() if v.get("annotator") != self.annotator}
            if entry is not None:
                kept["\t".join(entry.unit)] = {"annotator": self.annotator, "at": now}
            with suppress(OSError):
                self._write_claims(kept)
        return entry

    @property
    def claims_path(self) -> Path:
        return self.path.with_name(self.path.name + ".claims.json")

    def _claims(self) -> dict[str, Any]:
        try:
            found = json.loads(self.claims_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _write_claims(self, claims: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.claims_path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(claims, handle)
                os.fchmod(handle.fileno(), 0o644)
            os.replace(tmp, self.claims_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def undo(self) -> dict[str, Any] | None:
        """Remove this annotator's last label (None when there is none); the file is replaced atomically."""
        with self._locked():
            labels = [x for x in self.labels() if x.get("annotator") == self.annotator and x.get("source") == "human"]
            if not labels:
                return None
            last = labels[-1]
            kept = [raw for number, raw in enumerate(self.path.read_bytes().splitlines(keepends=True), start=1)
                    if number != last["_line"]]
            mode = stat.S_IMODE(self.path.stat().st_mode)
            try:
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".", suffix=".tmp")
            except OSError as exc:
                raise _write_error(exc, self.path) from None
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.writelines(kept)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)  # mkstemp's file is 0600: keep the label file's own mode
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException as exc:
                Path(tmp).unlink(missing_ok=True)
                if isinstance(exc, OSError):
                    raise _write_error(exc, self.path) from None
                raise
        last.pop("_line", None)
        return last


def _unit_of_key(key: str) -> Unit:
    item_id, judge, part = (key.split("\t") + ["", "", ""])[:3]
    return item_id, judge, part


def _check_writable(path: Path) -> None:
    """Refuse a label file that cannot be written, in one line: the file opened to append (without writing), or,
    for a new one, created and removed again in its folder."""
    try:
        if path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        path.unlink()
    except OSError as exc:
        raise InputError(f"cannot write the label file here ({exc.strerror or exc})", file=path) from None


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


@dataclass
class Pick:
    """One picked row of a picks file: where it came from and its inclusion probability. ``judge`` (and ``part``)
    when the file names the unit, as a cascade's escalation queue does (only the judges no member trusted); None
    for select-labels' picks, a design over items: every judge of the item (``-j`` limits them) is labelled."""

    item_id: str
    pi: float
    source: str
    judge: str | None = None
    part: str | None = None


def read_queue_picks(paths: Sequence[Path]) -> list[Pick]:
    """The picked rows of each picks file (``read_picks``: select-labels' format, or a cascade's escalation queue), in
    the order of the files, highest ``pi`` first within a file (ties in file order); a row picked twice counts once,
    first (the units it names are queued once in any case)."""
    found: list[Pick] = []
    if not paths:
        return found
    from scijudge.estimation.select import read_picks  # pandas: imported only when picks are given

    seen: set[tuple[str, str | None, str | None]] = set()
    for path in paths:
        frame = read_picks(path, queue_ok=True)  # an escalation queue of `scijudge cascade` is a queue here
        picked = frame[frame["picked"]].sort_values("pi", ascending=False, kind="stable")
        n = len(picked)
        judges = picked["judge"].astype(str).tolist() if "judge" in picked else [""] * n
        parts = picked["part"].astype(str).tolist() if "part" in picked else [""] * n
        for item_id, pi, judge, part in zip(picked["item_id"].astype(str), picked["pi"].astype(float), judges, parts):
            key = (item_id, judge or None, part if judge else None)  # an empty judge cell: the whole item
            if key not in seen:
                seen.add(key)
                found.append(Pick(item_id, pi, path.name, key[1], key[2]))
    return found


@dataclass
class QueueEntry:
    unit: Unit
    why: str
    """``picks.csv (pi 0.42)`` or ``unlabelled``."""


def _random_rank(unit: Unit) -> bytes:
    """A unit's place in a fixed random order: a hash of its key, unrelated to any score, the same on every
    restart (so a resumed session continues the same order)."""
    import hashlib

    return hashlib.blake2b("\x1f".join(unit).encode(), digest_size=8, person=b"scijudge-queue").digest()


class Queue:
    """What to label next: picked units first, then the unlabelled rest (see the module)."""

    def __init__(self, view: Any, picks: Sequence[Path] = (), judges: Sequence[str] | None = None) -> None:
        self.view = view
        self.judges = list(judges) if judges else None
        self.picks_files = list(picks)
        self._picks: list[Pick] | None = None
        self.shuffled = False  # the unlabelled rest in a fixed random order (an anytime-valid interval needs it)

    @property
    def picks(self) -> list[Pick]:
        if self._picks is None:
            self._picks = read_queue_picks(self.picks_files)
        return self._picks

    def _pick_units(self) -> Iterable[QueueEntry]:
        """The units of the picks, each once: the one a row names (a cascade's escalated judge of the item), or
        every judge of the item for a row that names none (``-j`` limits them)."""
        given: set[Unit] = set()
        for pick in self.picks:
            for judge, part in self.view.judges_of(pick.item_id):
                unit = (pick.item_id, judge, part)
                named = pick.judge is None or (pick.judge, pick.part or "") == (judge, part)
                if named and (self.judges is None or judge in self.judges) and unit not in given:
                    given.add(unit)
                    yield QueueEntry(unit, f"{pick.source} (pi {pick.pi:.3g})")

    def entries(self, done: set[Unit], skipped: set[Unit], limit: int | None = None) -> list[QueueEntry]:
        """The queue in order (its first ``limit`` entries), leaving out what is labelled (``done``) or skipped."""
        found: list[QueueEntry] = []
        given: set[Unit] = set()
        for entry in self._pick_units():
            given.add(entry.unit)
            if entry.unit not in done and entry.unit not in skipped:
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    return found
        if self.picks_files:  # the queue ends with the picks
            return found
        rest = None if limit is None else limit - len(found)
        if self.shuffled:
            units = sorted(self.view.units(judges=self.judges, leave_out=done | skipped | given), key=_random_rank)
            return found + [QueueEntry(unit, "unlabelled, in random order") for unit in units[:rest]]
        for unit in self.view.units(judges=self.judges, leave_out=done | skipped | given, limit=rest):
            found.append(QueueEntry(unit, "unlabelled"))
        return found

    def next(self, done: set[Unit], skipped: set[Unit]) -> QueueEntry | None:
        first = self.entries(done, skipped, limit=1)
        return first[0] if first else None

    def remaining_picks(self, done: set[Unit]) -> int:
        return sum(1 for entry in self._pick_units() if entry.unit not in done)
