"""Local model strings and load prerequisites: ``hf:`` strings to folders, dtypes, the optional extra.

Nothing here touches the network: folders are read as they are and hub ids only from the local Hugging Face
cache (``local_files_only``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scijudge.errors import ModelError
from scijudge.lm._extra import require_torch

PREFIX = "hf:"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_DTYPES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
}
# ----------------------------------------------------------------------------------------- model strings


@dataclass(frozen=True)
class ModelRef:
    """A resolved local model string: the base model folder and an optional adapter folder."""

    base: Path
    adapter: Path | None


def _resolve_folder(ref: str, what: str, *, named_by: str | None = None) -> Path:
    """A local folder for ``ref`` (a path, or a hub id already in the local HF cache); never downloads."""
    path = Path(ref).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise ModelError(f"{what} {ref!r} is a file; expected a model folder")
    if _HUB_ID.match(ref) and not ref.startswith("."):
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(ref, local_files_only=True))
        except Exception:
            pass
    source = f"{named_by} names {what} {ref!r}" if named_by else f"{what} {ref!r}"
    if "/" in ref.strip("/") and not ref.startswith(("/", ".", "~")) and _HUB_ID.match(ref):  # owner/name
        raise ModelError(
            f"{source}, which is neither a local folder nor in the local Hugging Face cache; scijudge never "
            f"downloads weights. Download it first (huggingface-cli download {ref}) or give a local folder.")
    import difflib

    from scijudge.lm.smollm2 import ALIAS

    close = difflib.get_close_matches(ref.lower(), [ALIAS], n=1, cutoff=0.7)
    hint = f"; did you mean hf:{ALIAS} (the bundled default model)?" if close else ": give a local model folder"
    raise ModelError(f"{source} is not a folder here{hint}")


def parse_model_string(model: str) -> ModelRef:
    """Resolve ``hf:<base>``, ``hf:<adapter>`` or ``hf:<base>+<adapter>`` to local folders (ModelError if not)."""
    if not isinstance(model, str) or not model.startswith(PREFIX) or not model[len(PREFIX) :].strip():
        raise ModelError(
            f"local model strings look like 'hf:<model folder or id>', 'hf:<adapter folder>' or "
            f"'hf:<base>+<adapter>'; got {model!r}"
        )
    body = model[len(PREFIX) :].strip()
    from scijudge.lm import smollm2

    if smollm2.is_alias(body):  # hf:smollm2: the real default model, converted once from its wheel
        return ModelRef(smollm2.resolve_alias(body), None)
    if "+" in body and not Path(body).expanduser().exists():
        base_ref, adapter_ref = (part.strip() for part in body.split("+", 1))
        base = smollm2.resolve_alias(base_ref) if smollm2.is_alias(base_ref) else _resolve_folder(base_ref, "base model")
        adapter = _resolve_folder(adapter_ref, "adapter")
        if not (adapter / "adapter_config.json").is_file():
            raise ModelError(f"{adapter} has no adapter_config.json, so it is not a PEFT adapter")
        return ModelRef(base, adapter)
    folder = _resolve_folder(body, "model")
    config_file = folder / "adapter_config.json"
    if not config_file.is_file():
        return ModelRef(folder, None)
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{config_file}: cannot read the adapter config: {exc}") from exc
    named: Any = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(named, str) or not named:
        raise ModelError(
            f"{config_file}, field 'base_model_name_or_path': the adapter does not name its base model; "
            f"use hf:<base folder>+{body}"
        )
    base = _resolve_folder(named, "base model", named_by=f"{config_file}, field 'base_model_name_or_path',")
    return ModelRef(base, folder)


DTYPE_ENV = "SCIJUDGE_LOCAL_DTYPE"
"""Environment variable naming the local engine's default dtype (float32, bfloat16, float16) for every local model
this process loads without an explicit ``dtype``: the override of the per-machine default below."""


def native_bf16_cpu() -> bool:
    """Whether this CPU computes bfloat16 natively (AMX tiles or AVX-512 BF16), as torch's CPU checks report.
    There bf16 matrix work runs at about twice float32's speed (``benchmarks/bench_smollm2.py --dtypes``);
    elsewhere it is emulated and slower than float32."""
    try:
        import torch
    except ImportError:
        return False
    cpu = getattr(torch, "cpu", None)
    for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        check = getattr(cpu, name, None)
        try:
            if check is not None and check():
                return True
        except Exception:  # a torch build without the check
            continue
    return False


def dtype_name(dtype: Any, on_cuda: bool) -> str:
    """Normalise a dtype argument to 'float32' | 'bfloat16' | 'float16'. The default (None or "auto"):
    ``SCIJUDGE_LOCAL_DTYPE`` if set, else bfloat16 on CUDA and on CPUs with native bf16 (``native_bf16_cpu``),
    float32 on other CPUs."""
    source = ""
    if dtype is None or dtype == "auto":
        dtype = os.environ.get(DTYPE_ENV, "").strip() or None
        source = f" (from the environment variable {DTYPE_ENV})" if dtype not in (None, "auto") else ""
    if dtype is None or dtype == "auto":
        return "bfloat16" if on_cuda or native_bf16_cpu() else "float32"
    text = str(dtype).removeprefix("torch.")
    if text not in _DTYPES:
        raise ModelError(f"unsupported dtype {dtype!r}{source}; use one of float32, bfloat16, float16")
    return _DTYPES[text]


def check_adapter_weights(adapter: Path) -> None:
    """Read the adapter's safetensors file(s) fully, so a corrupt file fails before the base is touched."""
    files = sorted(adapter.glob("*.safetensors"))
    if not files and not any(adapter.glob("adapter_model.bin")):
        raise ModelError(f"{adapter} has no adapter weights (adapter_model.safetensors)")
    from safetensors.torch import load_file

    for file in files:
        try:
            load_file(str(file), device="cpu")
        except Exception as exc:
            raise ModelError(f"{file}: corrupt or unreadable adapter weights: {type(exc).__name__}: {exc}") from exc


def weight_files(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir() if p.suffix in {".safetensors", ".bin", ".pt"})
    return ", ".join(names) if names else "no weight files"


def device_settings(dtype: Any, device_map: Any) -> tuple[str, Any]:
    """(dtype name, device_map) with the defaults: bf16 + ``"auto"`` when CUDA is there; on CPU bf16 where it is
    native, else fp32 (``dtype_name``)."""
    torch, _ = require_torch()
    on_cuda = torch.cuda.is_available() and device_map not in ("cpu", {"": "cpu"})
    return dtype_name(dtype, on_cuda), (device_map if device_map is not None else ("auto" if on_cuda else None))
