"""A fake judge model for trying the API paths offline: answers any structured-output request with a value that
fits the request's JSON schema, and decision requests with a distribution over the levels 1-5.

The answers are drawn from a hash of the prompt (the same prompt always gets the same answer) and mean nothing;
the rationales say so. Served by ``scijudge serve-fake`` through :class:`OpenAICompatServer`, so every request goes
through the real client, HTTP and fallback chain. Faults can be injected at a rate, to watch the chain retry.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from scijudge.testing.openai_server import Fault, Reply, all_text, level_logprobs

RATIONALE = "A fake model wrote this (scijudge serve-fake): no model read the answer, and the rating means nothing."
DECISION_LEVELS = ("1", "2", "3", "4", "5")


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (``#/$defs/Name``) to the schema it names."""
    seen = 0
    while "$ref" in schema and seen < 32:
        node: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node.get(part, {}) if isinstance(node, dict) else {}
        schema, seen = node if isinstance(node, dict) else {}, seen + 1
    return schema


def instance(schema: dict[str, Any], rng: random.Random, root: dict[str, Any] | None = None) -> Any:
    """A value that validates against ``schema`` (the subset providers' strict mode allows), chosen by ``rng``."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key, []) if _resolve(o, root).get("type") != "null"]
        if options:
            return instance(rng.choice(options), rng, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: instance(sub, rng, root) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 0)), min(int(schema.get("maxItems", 2)), 2))
        return [instance(schema.get("items", {"type": "string"}), rng, root) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, rng, integer=kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return RATIONALE


def _number(schema: dict[str, Any], rng: random.Random, *, integer: bool) -> int | float:
    """A number within the schema's bounds (1..5 when it has none), on its ``multipleOf`` grid."""
    low = schema.get("minimum", schema.get("exclusiveMinimum", 1))
    high = schema.get("maximum", schema.get("exclusiveMaximum", max(low, 5)))
    step = schema.get("multipleOf", 1 if integer else None)
    if step:
        count = int(math.floor((high - low) / step + 1e-9))
        value = low + step * rng.randint(0, max(count, 0))
        return int(value) if integer else round(value, 10)
    return round(rng.uniform(low, high), 3)


@dataclass
class FakeModel:
    """A handler for :class:`OpenAICompatServer`: a schema-shaped answer, a decision distribution, or a fault."""

    seed: int = 0
    fault_rate: float = 0.0

    def _rng(self, body: dict[str, Any], salt: str = "") -> random.Random:
        digest = hashlib.blake2b(f"{self.seed}\x1f{salt}\x1f{all_text(body)}".encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(digest, "big"))

    def __call__(self, body: dict[str, Any]) -> Reply | Fault | str:
        if self.fault_rate and random.random() < self.fault_rate:  # faults are not a function of the prompt
            return Fault(503, "injected fault (scijudge serve-fake --fault-rate)", "server_error")
        rng = self._rng(body)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema") or {}
            return json.dumps(instance(schema, rng))
        if body.get("logprobs"):
            weights = [rng.random() + 0.05 for _ in DECISION_LEVELS]
            total = sum(weights)
            dist = {level: w / total for level, w in zip(DECISION_LEVELS, weights)}
            return Reply(max(dist, key=lambda k: dist[k]), logprobs=level_logprobs(dist), completion_tokens=1)
        return Fault(400, "unsupported response_format: scijudge serve-fake answers json_schema and decision requests",
                     "invalid_request_error")
