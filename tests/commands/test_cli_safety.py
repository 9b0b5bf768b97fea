"""Issue 35, items 1-4 and 8 (export's suffix), as a user types them: no command writes over its inputs, a file that
is not a store or a damaged store is one line from every reader, and reading creates no file beside a store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _cli_checks import digest as _digest
from _cli_checks import one_line_error as _one_line_error

from scijudge.cli import app
from scijudge.records import JudgeResult
from scijudge.run.store import Run

JUDGE = "yescieval.qa.correctness"


def _store(path: Path, model: str = "judge-a", n: int = 240) -> Path:
    with Run(path) as run:
        run.record_many(JudgeResult(item_id=f"q{k:03d}", judge=JUDGE, family="likert", spec_hash="h", model=model,
                                    status="ok", score=float(k % 5 + 1), rationale="r" * 40,
                                    probs={str(s): 0.2 for s in range(1, 6)},
                                    created_at="2026-12-01T10:00:00+00:00").model_dump(mode="json") for k in range(n))
    return path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _store(tmp_path / "S.sqlite")
    _store(tmp_path / "B.sqlite", model="judge-b")
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps({"item_id": f"q{k:03d}", "judge": JUDGE,
                                                               "score": k % 5 + 1}) + "\n" for k in range(240)))
    return tmp_path


@pytest.mark.slow  # nine commands, the first imports of pandas and scipy among them: seconds
def test_no_command_writes_over_its_inputs(folder):
    _store(folder / "store.jsonl")  # a store named like its default export
    before = _digest(folder)
    runner = CliRunner()
    for args, needle in [
        (["export", "S.sqlite", "--out", "S.sqlite"], "--out: the output S.sqlite is the run store S.sqlite"),
        (["export", "S.sqlite", "--out", "S.sqlite", "--format", "csv"], "is the run store S.sqlite"),
        (["export", "S.sqlite", "--out", "./S.sqlite-wal"], "is the run store S.sqlite"),
        (["export", "store.jsonl"], "the default output store.jsonl is the run store itself"),
        (["select-labels", "--run", "S.sqlite", "-j", JUDGE, "--budget", "4", "--out", "S.sqlite"],
         "--out: the output S.sqlite is the run store S.sqlite"),
        (["select-labels", "--run", "S.sqlite", "-j", JUDGE, "--budget", "4", "--labels", "labels.jsonl",
          "--out", "labels.jsonl"], "is the input labels.jsonl"),
        (["jury", "S.sqlite", "B.sqlite", "-m", "judge-a", "-m", "judge-b", "--name", "p", "--out", "B.sqlite"],
         "is the run store B.sqlite"),
        (["import-judgments", "labels.jsonl", "--run", "S.sqlite", "--labels-out", "S.sqlite"],
         "--labels-out: the output S.sqlite is the run store S.sqlite"),
        (["perturb", "labels.jsonl", "--level", "subtle", "--out", "labels.jsonl"], "is the input labels.jsonl"),
    ]:
        _one_line_error(runner.invoke(app, args), needle)
    assert _digest(folder) == before, "every input as it was, and no file added"


def test_calibrate_never_writes_its_report_over_an_input(folder):
    (folder / "rep").mkdir()
    labels = folder / "rep" / "report.json"
    labels.write_text((folder / "labels.jsonl").read_text())
    result = CliRunner().invoke(app, ["calibrate", "--labels", str(labels), "--run", "S.sqlite", "--n-boot", "0",
                                      "--out", "rep"])
    _one_line_error(result, "is the input")
    assert labels.read_text() == (folder / "labels.jsonl").read_text()
    assert sorted(p.name for p in (folder / "rep").iterdir()) == ["report.json"], "nothing written half-way"


def test_export_format_follows_the_out_suffix_unless_format_is_given(folder):
    runner = CliRunner()
    for args, first in [(["--out", "x.csv"], "key,item_id,"), (["--out", "x.jsonl"], '{"key":'),
                        (["--out", "y.jsonl", "--format", "csv"], "key,item_id,"), (["--out", "y.txt"], '{"key":'),
                        (["--out", "Z.CSV"], "key,item_id,")]:
        done = runner.invoke(app, ["export", "S.sqlite", *args])
        assert done.exit_code == 0 and "wrote 240 judgments" in done.output, done.output
        assert (folder / args[1]).read_text().startswith(first), args
    done = runner.invoke(app, ["export", "S.sqlite"])
    assert done.exit_code == 0 and (folder / "S.jsonl").read_text().startswith('{"key":')


def _not_stores(folder: Path) -> dict[str, bytes]:
    other = sqlite3.connect(folder / "app.db")
    other.execute("CREATE TABLE users (name TEXT)")
    other.commit()
    other.close()
    files = {"empty.jsonl": b"", "items.jsonl": b'{"id": "a", "answer": "b"}\n',
             "bad.sqlite": b"SQLite format 3\x00" + b"\xee" * 300}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return {**files, "app.db": (folder / "app.db").read_bytes()}


def test_a_file_that_is_not_a_store_is_one_line_from_every_reader_and_gets_no_file_beside_it(folder):
    files = _not_stores(folder)
    before = _digest(folder)
    runner = CliRunner()
    for name in files:
        for args in (["export", name, "--out", "o.jsonl"], ["batches", name],
                     ["jury", "S.sqlite", name, "-m", "judge-a", "-m", "judge-b", "--name", "p", "--out", "j.sqlite"],
                     ["select-labels", "--run", name, "-j", JUDGE, "--budget", "4", "--out", "p.csv"],
                     ["estimate", "--run", name, "--labels", "labels.jsonl"],
                     ["calibrate", "--run", name, "--labels", "labels.jsonl", "--n-boot", "0"]):
            _one_line_error(runner.invoke(app, args), "not a scijudge run store", name)
    assert _digest(folder) == before, "no -wal, -shm, output or store file created, no input changed"


def test_a_damaged_store_is_one_line_for_readers_and_export_leaves_no_partial_file(folder):
    data = (folder / "S.sqlite").read_bytes()
    (folder / "S.sqlite").write_bytes(data[:-1000])
    runner = CliRunner()
    for args in (["export", "S.sqlite", "--out", "o.jsonl"], ["export", "S.sqlite", "--out", "o.csv"],
                 ["calibrate", "--run", "S.sqlite", "--labels", "labels.jsonl", "--n-boot", "0"],
                 ["select-labels", "--run", "S.sqlite", "-j", JUDGE, "--budget", "4", "--out", "p.csv"]):
        _one_line_error(runner.invoke(app, args), "damaged run store", "S.sqlite")
    assert not [p.name for p in folder.iterdir() if p.name.startswith(("o.", ".o.", "p.", ".p."))]


def test_batches_on_a_read_only_mount_or_a_444_file_reads_and_creates_nothing(folder, tmp_path):
    from scijudge.testing.mounts import mount_unavailable, tmpfs

    (folder / "S.sqlite").chmod(0o444)
    before = _digest(folder)
    done = CliRunner().invoke(app, ["batches", "S.sqlite"])
    assert done.exit_code == 0 and "no batches" in done.output, done.output
    assert _digest(folder) == before
    if (why := mount_unavailable()) is not None:
        pytest.skip(f"the read-only mount half: {why}")
    try:
        mounted = tmpfs(tmp_path / "ro")
        mount = mounted.__enter__()
    except OSError as exc:
        pytest.skip(f"the read-only mount half: {exc}")
    try:
        (mount.folder / "S.sqlite").write_bytes((folder / "S.sqlite").read_bytes())
        (mount.folder / "bad.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xee" * 300)
        mount.freeze()
        done = CliRunner().invoke(app, ["batches", str(mount.folder / "S.sqlite")])
        assert done.exit_code == 0 and "no batches" in " ".join(done.output.split()), done.output
        _one_line_error(CliRunner().invoke(app, ["batches", str(mount.folder / "bad.sqlite")]),
                        "not a scijudge run store")
        assert sorted(p.name for p in mount.folder.iterdir()) == ["S.sqlite", "bad.sqlite"]
    finally:
        mounted.__exit__(None, None, None)


@pytest.mark.slow  # two `scijudge judge` processes and 240 requests through the loopback server: seconds
def test_judge_resumes_no_damaged_store_as_done_and_buys_nothing(loopback, tmp_path):
    import os
    import subprocess
    import sys

    spec = 'name = "t.cli"\nfamily = "likert"\ndescription = "d"\ninstructions = "Rate it."\n[[inputs]]\nname = "answer"\n'
    (tmp_path / "spec.toml").write_text(spec)
    (tmp_path / "items.jsonl").write_text("".join(json.dumps({"id": f"it{i:03d}", "answer": f"text {i} " * 20}) + "\n"
                                                 for i in range(240)))
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="true", DSPY_CACHEDIR=str(tmp_path / "cache"))
    server = loopback(lambda body: json.dumps({"judgment": {"rationale": "r" * 200, "rating": 4}}))
    args = [sys.executable, "-m", "scijudge", "judge", "items.jsonl", "-j", "spec.toml", "-m", "openai/judge",
            "--api-base", server.url, "--run", "run.sqlite", "--no-progress", "--no-cache", "--concurrency", "16"]
    first = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0 and server.count == 240, first.stderr
    store = tmp_path / "run.sqlite"
    store.write_bytes(store.read_bytes()[:-1000])
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "damaged run store" in again.stderr and "Traceback" not in again.stderr, again.stderr
    assert server.count == 240, "nothing asked again on top of the damage, nothing taken as done"
