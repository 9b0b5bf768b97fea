"""The items behind the judgments, for the viewer: an index of byte offsets into items JSONL files, so one item
is read (and validated as ``load_items`` validates it) only when its page is opened, never the whole file."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scijudge.errors import InputError


class ItemIndex:
    """Item id -> (file, offset) over the given items files, built on first use (one pass, ids only)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(p) for p in paths]
        for path in self.paths:
            if not path.is_file():
                raise InputError("items file not found", file=path)
        self._offsets: dict[str, tuple[int, int, int]] | None = None
        self._lock = threading.Lock()

    def _index(self) -> dict[str, tuple[int, int, int]]:
        with self._lock:
            if self._offsets is None:
                offsets: dict[str, tuple[int, int, int]] = {}
                for at, path in enumerate(self.paths):
                    with path.open("rb") as handle:
                        offset, number = 0, 0
                        for raw in handle:
                            number += 1
                            if raw.strip():
                                try:
                                    found = json.loads(raw).get("id")
                                except (ValueError, AttributeError):
                                    found = None
                                if isinstance(found, str) and found not in offsets:
                                    offsets[found] = (at, offset, number)
                            offset += len(raw)
                self._offsets = offsets
            return self._offsets

    def count(self, path: Path) -> int | None:
        """The items of one items file (None: not one of the files)."""
        found = [at for at, p in enumerate(self.paths) if p.resolve() == Path(path).resolve()]
        if not found:
            return None
        return sum(1 for at, _offset, _line in self._index().values() if at == found[0])

    def for_store(self, recorded: Any) -> Path | None:
        """The items file a store recorded, if it is one of these files."""
        if not isinstance(recorded, str) or not recorded:
            return None
        match = [p for p in self.paths if p.resolve() == Path(recorded).resolve() or p.name == Path(recorded).name]
        return match[0] if match else None

    def has(self, item_id: str) -> bool:
        return bool(self.paths) and item_id in self._index()

    def get(self, item_id: str) -> list[tuple[str, str]] | str:
        """The item's inputs as (name, text) in reading order, or a sentence saying why there are none."""
        item = self.item(item_id)
        return item if isinstance(item, str) else item_texts(item)

    def item(self, item_id: str) -> Any:
        """The item (``scijudge.data.Item``, validated as ``load_items`` validates it), or a sentence saying why
        there is none."""
        if not self.paths:
            return "no items file: pass --items ITEMS.jsonl (or judge with `scijudge judge`, which records it)"
        where = self._index().get(item_id)
        if where is None:
            return f"item {item_id!r} is in none of the items files ({', '.join(p.name for p in self.paths)})"
        at, offset, number = where
        with self.paths[at].open("rb") as handle:
            handle.seek(offset)
            raw = handle.readline()
        from pydantic import ValidationError

        from scijudge.data import Item
        from scijudge.errors import from_validation_error

        try:
            return Item.model_validate(json.loads(raw))
        except ValidationError as exc:
            return str(from_validation_error(exc, file=self.paths[at], line=number))


def item_texts(item: Any) -> list[tuple[str, str]]:
    """An item's inputs as written: question, each paper, the answers, named inputs and meta."""
    texts: list[tuple[str, str]] = []
    if item.question:
        texts.append(("question", item.question))
    for n, paper in enumerate(item.papers, start=1):
        texts.append((f"paper [{n}] {paper.title}", paper.abstract))
    if item.answer:
        texts.append(("answer", item.answer))
    if item.answer_b is not None:
        texts.append(("answer_b", item.answer_b))
    texts += [(name, value) for name, value in item.inputs.items()]
    if item.meta:
        texts.append(("meta", json.dumps(item.meta, ensure_ascii=False, indent=2)))
    return texts
