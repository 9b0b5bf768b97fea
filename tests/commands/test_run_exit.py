"""How a judging command leaves: idle pool threads that are ending are waited for; a request that is really stuck
is abandoned (``os._exit``) only after the settle time."""

from __future__ import annotations

import threading
import time

import pytest
import typer

from scijudge.commands import _run_control


class _Store:
    closed = False

    def close(self) -> None:
        self.closed = True


class _Abandoned(Exception):
    pass


def _no_hard_exit(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    codes: list[int] = []

    def hard_exit(code: int) -> None:
        codes.append(code)
        raise _Abandoned

    monkeypatch.setattr(_run_control.os, "_exit", hard_exit)
    return codes


def test_a_pool_thread_that_is_ending_is_waited_for_and_the_exit_is_normal(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI lost a pytest worker this way: a run stopped by a missing API key left its pool's idle threads a few
    hundredths of a second from their end, and the command's exit killed the whole process."""
    codes = _no_hard_exit(monkeypatch)
    ending = threading.Thread(target=time.sleep, args=(0.3,), name="scijudge_0", daemon=False)
    ending.start()
    store = _Store()
    with pytest.raises(typer.Exit) as left:
        _run_control.exit_run(store, 3)
    assert left.value.exit_code == 3 and codes == [] and store.closed and not ending.is_alive()


def test_a_stuck_request_is_abandoned_after_the_settle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    codes = _no_hard_exit(monkeypatch)
    monkeypatch.setattr(_run_control, "_SETTLE_S", 0.2)
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, args=(30,), name="scijudge_1", daemon=False)
    stuck.start()
    try:
        started = time.monotonic()
        with pytest.raises(_Abandoned):
            _run_control.exit_run(_Store(), 130)
        assert codes == [130] and 0.15 < time.monotonic() - started < 5
    finally:
        release.set()
        stuck.join()
