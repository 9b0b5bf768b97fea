"""Fill judges' text blocks from the command line (``--block NAME=FILE``) and set a prompt preset.

``NAME=FILE`` reads the block's text from a UTF-8 file; ``NAME=`` empties the block (e.g. ``task_context=``
switches the QA rubrics' default task context off); ``NAME=builtin:DOMAIN`` uses the text shipped for a
domain in ``signatures/blocks/<DOMAIN>/`` (``domain_vocabulary.md``, and ``examples/<rubric>.md`` for the
rubric-specific worked examples). A block name that none of the selected judges has is an error, so a typo
never passes silently.
"""

from __future__ import annotations

from pathlib import Path

from scijudge.errors import InputError
from scijudge.spec.judge_spec import JudgeSpec

BUILTIN_PREFIX = "builtin:"


def builtin_domains() -> list[str]:
    """Domains with shipped deep-research blocks (folder names under ``signatures/blocks``)."""
    from scijudge._resources import shipped_path

    root = shipped_path("signatures/blocks")
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root else []


def parse_block_option(option: str) -> tuple[str, str]:
    """``NAME=VALUE`` → (name, value); anything else is an error naming the option."""
    name, sep, value = option.partition("=")
    if not sep or not name.strip().isidentifier():
        raise InputError(f"expected NAME=FILE (or NAME= to empty the block), got {option!r}", field="--block")
    return name.strip(), value.strip()


def _builtin_text(domain: str, block: str, spec: JudgeSpec) -> str | None:
    """Shipped text of a block for a domain and this judge; None when nothing is shipped for this judge."""
    from scijudge._resources import shipped_path

    known = builtin_domains()
    if domain not in known:
        raise InputError(f"no shipped blocks for domain {domain!r}; shipped: {', '.join(known) or 'none'}",
                         field="--block")
    rubric = spec.name.rsplit(".", 1)[-1]
    for relative in (f"signatures/blocks/{domain}/{block}/{rubric}.md", f"signatures/blocks/{domain}/{block}.md"):
        path = shipped_path(relative)
        if path is not None:
            return path.read_text(encoding="utf-8").strip()
    return None


def _file_text(value: str) -> str:
    path = Path(value)
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise InputError("block file not found", file=path, field="--block") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read block file ({exc})", file=path, field="--block") from None


def apply_blocks(specs: list[JudgeSpec], blocks: list[str]) -> list[JudgeSpec]:
    """The specs with blocks filled from ``NAME=FILE`` options (``NAME=builtin:DOMAIN``; ``NAME=`` empties it)."""
    parsed = [parse_block_option(option) for option in blocks]
    for name, _ in parsed:
        if not any(name in spec.blocks for spec in specs):
            available = sorted({b for spec in specs for b in spec.blocks})
            raise InputError(f"none of the selected judges has a block {name!r}; they have: "
                             f"{', '.join(available) or 'no blocks'}", field="--block")
    file_texts = {value: _file_text(value) for _, value in parsed if value and not value.startswith(BUILTIN_PREFIX)}
    out = []
    for spec in specs:
        texts: dict[str, str] = {}
        for name, value in parsed:
            if name not in spec.blocks:
                continue
            if value.startswith(BUILTIN_PREFIX):
                text = _builtin_text(value.removeprefix(BUILTIN_PREFIX).strip(), name, spec)
                if text is None:
                    continue
                texts[name] = text
            else:
                texts[name] = file_texts[value] if value else ""
        out.append(spec.with_blocks(**texts) if texts else spec)
    return out


__all__ = ["BUILTIN_PREFIX", "apply_blocks", "builtin_domains", "parse_block_option"]
