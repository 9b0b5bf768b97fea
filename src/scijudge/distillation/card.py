"""The card of a distilled judge: ``OUT/card.json`` (machine-readable) and ``OUT/README.md`` beside the adapter.

It records what the adapter was trained on and how (data hash, split, base with its weight hashes, settings,
steps, loss curve, versions) and how it compared with its base and teacher on the held-out split. Neither file
disturbs loading the folder as ``hf:OUT``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from pathlib import Path
from typing import Any

CARD_KIND = "scijudge-distilled-judge"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def versions() -> dict[str, str]:
    """Versions of what trained the adapter."""
    import importlib.metadata as md

    found = {"python": platform.python_version()}
    for name in ("scijudge", "torch", "transformers", "peft", "numpy", "dspy"):
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return found


def base_record(base_dir: Path) -> dict[str, Any]:
    base_dir = base_dir.resolve()
    weights = sorted(base_dir.glob("*.safetensors")) or sorted(base_dir.glob("*.bin"))
    record: dict[str, Any] = {"path": str(base_dir), "weights_sha256": {w.name: file_sha256(w) for w in weights}}
    if (base_dir / "config.json").is_file():
        record["config_sha256"] = file_sha256(base_dir / "config.json")
    return record


def _write_text(path: Path, text: str) -> None:
    """Write through a temporary file and rename it in, so a crash never leaves half a card."""
    import os

    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _lr(card: dict[str, Any]) -> str:
    chosen = (card.get("recipe") or {}).get("lr")
    given = card["config"]["lr"]
    return f"{given:g}" if chosen in (None, given) else f"{chosen:g} (range test from {given:g})"


def write_card(out_dir: Path, card: dict[str, Any]) -> Path:
    """Write card.json and a short README.md into ``out_dir``; returns the card's path."""
    card = {"kind": CARD_KIND, **card, "versions": versions(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = out_dir / "card.json"
    _write_text(path, json.dumps(card, indent=2, default=str))
    ev = card.get("evaluation") or {}
    lines = [f"# Distilled judge: {card.get('judge')}", "",
             f"- base: `{card['base']['path']}`", f"- trained on: {card.get('source')}",
             f"- data sha256: `{card.get('data_hash')}`",
             f"- split: {card['split']['train']} train / {card['split']['held_out']} held-out (seed {card['split']['seed']})",
             f"- steps: {card.get('steps')} (form {card['config']['form']}, peak lr {_lr(card)}, "
             f"LoRA r {card['config']['lora_r']})"]
    trained = card.get("trained") or {}
    if trained:
        what = f"LoRA r {trained.get('lora_r')} on {', '.join(trained.get('lora_modules', []))} " \
               f"({trained.get('lora_parameters')} parameters)"
        rows = trained.get("output_layer_rows")
        if rows:
            what += (f"; the level tokens' rows {rows['token_ids']} of `{rows['layer']}` ({rows['parameters']} "
                     "parameters, initialised by a linear probe on the base's answer-position states)")
        lines.append(f"- trained: {what}; every other weight is the base's")
    loss = card.get("loss") or {}
    if loss:
        lines.append(f"- training loss: {loss['start']:.4f} at the start (untrained), {loss['end']:.4f} at the end; "
                     f"smoothed: {' '.join(f'{x:.3f}' for x in loss.get('smoothed', []))}")
    lines.append("")
    for flag in card.get("flags") or []:
        lines += [f"**Did not learn: {flag}.**", ""]
    if ev.get("exact_agreement"):
        lines += [f"Held-out exact agreement with {ev.get('against')} ({ev.get('mode')} mode):", ""]
        for name, row in ev["exact_agreement"].items():
            lines.append(f"- {name}: {row['value']:.3f} [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] on {row['n']} items")
        gain = ev.get("gain")
        if gain:
            lines.append(f"- student minus base: {gain['diff']:+.3f} [{gain['ci'][0]:+.3f}, {gain['ci'][1]:+.3f}] "
                         f"(paired bootstrap, {gain['n']} items)")
        if ev.get("warning"):
            lines += ["", f"**Warning: {ev['warning']}.**"]
        lines += ["", *(f"Note: {note}." for note in ev.get("notes") or [])]  # a few-items note among them
        lines += ["", "Paired comparison and per-rubric tables: `evaluation/report.html`, `evaluation/*.csv`."]
    lines += ["", f"Load it with `-m hf:{out_dir.resolve()}`. See card.json for the loss curve, settings and versions.", ""]
    _write_text(out_dir / "README.md", "\n".join(lines))
    return path
