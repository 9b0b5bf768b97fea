"""CLI command `scijudge schema`: the JSON Schema of one canonical item line."""

from __future__ import annotations

import json


def schema_cmd() -> None:
    """Print the JSON Schema of one line of the canonical item format.

    Example: scijudge schema > items.schema.json
    """
    from scijudge.data import item_json_schema

    print(json.dumps(item_json_schema(), indent=2))
