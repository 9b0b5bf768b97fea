"""What a judgment is, as stored: the result, its attempts, its identity and the run-store row schema.

This module imports neither DSPy nor any judge layer (only pydantic), so that a run store can be
opened, read and exported without loading an LM stack. A judgment's identity (``judgment_key``) covers
everything that determines it: the item id and the content the judge reads (``input_hash``), the judge
and its spec, the model, the endpoint (without credentials) and the decoding settings.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "abstained"]
Outcome = Literal[
    "ok", "recovered_wrapper", "format_rejected", "parse_error", "validation_error", "truncated",
    "rate_limited", "server_error", "timeout", "transport_error", "context_overflow", "provider_error",
    "request_rejected", "not_found",
]

_TEXT, _KEPT = "TEXT NOT NULL", "TEXT NOT NULL DEFAULT ''"
COLUMN_SQL: dict[str, str] = {
    "key": "TEXT PRIMARY KEY", "item_id": _TEXT, "judge": _TEXT, "part": _KEPT, "family": _TEXT, "spec_hash": _TEXT,
    "model": _TEXT, "endpoint": _KEPT, "input_hash": _KEPT, "decoding": _KEPT, "status": _TEXT, "score": "REAL",
    "verdict": "TEXT", "confidence": "REAL", "probs": "TEXT", "result": "TEXT", "rationale": "TEXT",
    "reason": "TEXT", "attempts": "TEXT", "tokens_in": "INTEGER", "tokens_out": "INTEGER", "cost": "REAL",
    "latency_s": "REAL", "created_at": "TEXT", "current": "INTEGER NOT NULL DEFAULT 1",
}
"""The run-store row schema, the one definition: each column with its SQLite type (JSON columns are TEXT)."""
RUN_COLUMNS: tuple[str, ...] = tuple(COLUMN_SQL)
"""Columns of a run-store row (``Run.rows()``, ``Run.to_pandas()``, exports), in order."""
JSON_COLUMNS: tuple[str, ...] = ("probs", "result", "attempts")
CURRENT_GROUP: tuple[str, ...] = ("item_id", "judge", "part", "model", "endpoint")
"""A row is the *current* judgment of its group; a newer judgment of the same group makes it history."""



class Same(NamedTuple):
    """One value shared by every row of a ``Columns`` chunk."""

    value: Any


@dataclass
class Columns:
    """A chunk of record dumps (``JudgeResult.model_dump(mode="json")``'s fields) held column by column, for
    bulk writers: ``values`` maps each field to a list of ``n`` values or to ``Same(value)``. Building a
    chunk of columns costs a fraction of building ``n`` dicts, which is most of the cost of a large import."""

    n: int
    values: dict[str, list[Any] | Same]

    def column(self, name: str) -> list[Any]:
        value = self.values[name]
        return [value.value] * self.n if isinstance(value, Same) else value

    def dumps(self) -> list[dict[str, Any]]:
        """The chunk as record dumps, one per row."""
        names = list(self.values)
        return [dict(zip(names, row)) for row in zip(*(self.column(c) for c in names))] if names else []

    @classmethod
    def of(cls, dumps: Sequence[dict[str, Any]]) -> Columns:
        """Record dumps as one chunk (their fields: the first dump's)."""
        if not dumps:
            return cls(0, {})
        return cls(len(dumps), {name: [d[name] for d in dumps] for name in dumps[0]})


class Attempt(BaseModel):
    """One request sent (or answered from scijudge's cache) inside the chain, with what came of it."""

    model_config = ConfigDict(defer_build=True)  # built at first use: reading a store (calibrate) never needs it

    strategy: str
    temperature: float
    max_tokens: int | None = None
    outcome: Outcome
    error_class: str | None = None
    error: str | None = None
    status: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    reply: str | None = None
    """The text the model returned for this request, as it came back (before any parsing: a reply that did not
    parse is kept too), cut to ``REPLY_CHARS`` by ``reply_text``; None when no reply came (a transport error, a
    local decision read from logits) or in stores written before replies were kept."""


REPLY_CHARS = 20_000
"""The most characters of a reply an attempt keeps. The chain's default budget (1,024 tokens, doubled once for a
cut-off answer) is well under it, so an ordinary reply is kept whole; a runaway reply (a model looping up to a
large ``max_tokens``) keeps its start and its end, where a cut-off JSON shows where it broke."""


def reply_text(text: str | None, limit: int = REPLY_CHARS) -> str | None:
    """A reply as an attempt keeps it: whole up to ``limit`` characters, else its first three quarters and its last
    quarter around a line that says how many characters were left out."""
    if text is None or len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters of the reply not kept ...]\n{text[-tail:]}"


class JudgeResult(BaseModel):
    """One judgment as stored: typed output or an abstention with its reason, plus its full cost."""

    model_config = ConfigDict(defer_build=True)

    item_id: str
    judge: str
    part: str = ""
    family: str
    spec_hash: str
    model: str
    endpoint: str = ""
    input_hash: str = ""
    decoding: str = ""
    status: Status
    score: float | None = None
    verdict: str | None = None
    confidence: float | None = None
    probs: dict[str, float] | None = None
    result: dict[str, Any] | None = None
    rationale: str | None = None
    reason: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latency_s: float = 0.0
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def key(self) -> str:
        """Identity in a run store (see ``judgment_key``)."""
        return judgment_key(self.item_id, self.judge, self.part, self.spec_hash, self.model,
                            self.endpoint, self.input_hash, self.decoding)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Identity:
    """What makes one judgment what it is, known before it is made: the run store's key is computed from it."""

    item_id: str
    judge: str
    part: str
    spec_hash: str
    model: str
    endpoint: str = ""
    input_hash: str = ""
    decoding: str = ""

    @property
    def key(self) -> str:
        return judgment_key(self.item_id, self.judge, self.part, self.spec_hash, self.model, self.endpoint,
                            self.input_hash, self.decoding)

    @property
    def legacy_key(self) -> str:
        """The key a store written before content and endpoint were part of the identity gave this judgment."""
        return judgment_key(self.item_id, self.judge, self.part, self.spec_hash, self.model)


def result_row(result: JudgeResult, *, current: bool = True) -> dict[str, Any]:
    """A JudgeResult as a run-store row (``RUN_COLUMNS``, in order; JSON columns as Python values), as
    ``Run.rows()`` reads it back: what importers hand over and exports contain."""
    data = {**result.model_dump(mode="json"), "key": result.key, "current": current}
    return {column: data[column] for column in RUN_COLUMNS}


def judgment_key(item_id: str, judge: str, part: str, spec_hash: str, model: str, endpoint: str = "",
                 input_hash: str = "", decoding: str = "") -> str:
    """Stable key of a judgment (a hash, so odd characters in ids never matter).

    Without endpoint, input hash and decoding it equals the key of stores written before they were part
    of the identity, which lets a migrated store recognise its own rows.
    """
    fields = [item_id, judge, part, spec_hash, model]
    if endpoint or input_hash or decoding:
        fields += [endpoint, input_hash, decoding]
    return hashlib.sha256("\x1f".join(fields).encode()).hexdigest()[:32]


def judgment_keys(*fields: Iterable[str]) -> list[str]:
    """``judgment_key`` of many judgments at once, given field by field (eight iterables, in
    ``judgment_key``'s order): the same keys, without a function call per key (bulk imports)."""
    sha256, sep = hashlib.sha256, "\x1f"
    return [sha256((sep.join(row) if row[5] or row[6] or row[7] else sep.join(row[:5])).encode()).hexdigest()[:32]
            for row in zip(*fields)]


def input_hash(inputs: dict[str, Any]) -> str:
    """Hash of the inputs a judge reads for one judgment (what goes into the prompt)."""
    text = json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def decoding_text(settings: dict[str, Any]) -> str:
    """The decoding settings that change an answer, as compact canonical JSON (stored and keyed)."""
    return json.dumps({k: v for k, v in settings.items() if v is not None}, sort_keys=True, separators=(",", ":"))


def decoding_settings(text: Any) -> dict[str, Any]:
    """A stored ``decoding`` text read back as settings (``decoding_text``'s inverse); {} for an empty, damaged or
    non-object text."""
    try:
        found = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def safe_endpoint(api_base: str | None) -> str:
    """An endpoint URL without credentials: userinfo, query and fragment removed ('' for the provider default)."""
    if not api_base:
        return ""
    if isinstance(api_base, str):
        return _safe_endpoint(api_base)  # once per endpoint: every judgment's result asks
    return _safe_endpoint.__wrapped__(api_base)


@lru_cache(maxsize=256)
def _safe_endpoint(api_base: str) -> str:
    try:
        parts = urlsplit(str(api_base).strip())
    except ValueError:
        return "<unparseable endpoint>"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def model_name(lm: Any) -> str:
    """The model string recorded in results; never includes keys or endpoints."""
    if lm is None:
        return "unconfigured"
    return str(getattr(lm, "model", type(lm).__name__))


def endpoint_of(lm: Any) -> str:
    """The credential-free endpoint an LM sends to ('' for a provider's default endpoint or a local model); an
    engine that owns its connection (a decision endpoint) declares it as ``engine.endpoint``."""
    kwargs = getattr(lm, "kwargs", None)
    base = kwargs.get("api_base") or kwargs.get("base_url") if isinstance(kwargs, dict) else None
    declared = getattr(getattr(lm, "engine", None), "endpoint", None)
    base = declared if isinstance(declared, str) and declared else base
    return safe_endpoint(base)


def attempt_totals(attempts: list[Attempt]) -> dict[str, Any]:
    """A judgment's tokens and cost: sums over its attempts (cost None when no attempt has a known cost)."""
    costs = [a.cost for a in attempts if a.cost is not None]
    return {"tokens_in": sum(a.tokens_in or 0 for a in attempts),
            "tokens_out": sum(a.tokens_out or 0 for a in attempts), "cost": math.fsum(costs) if costs else None}


def assemble_result(*, item_id: str, judge: str, part: str, family: str, spec_hash: str, lm: Any,
                    inputs_hash: str, decoding: str, attempts: list[Attempt], latency: float,
                    abstained_reason: str | None = None, **fields: Any) -> JudgeResult:
    """The one place a JudgeResult is assembled from a judge call: identity, totals over attempts, outcome."""
    base = dict(
        item_id=item_id, judge=judge, part=part, family=family, spec_hash=spec_hash, model=model_name(lm),
        endpoint=endpoint_of(lm), input_hash=inputs_hash, decoding=decoding, attempts=list(attempts),
        latency_s=latency, **attempt_totals(attempts),
    )
    if abstained_reason is not None:
        return JudgeResult(status="abstained", reason=abstained_reason, **base, **fields)
    return JudgeResult(status="ok", **base, **fields)
