"""Recognising an inspect_ai ``.json`` log: from its opening bytes (today) against parsing the whole document first.

Builds a large inspect log from the committed fixture (tests/importers/fixtures/inspect/inspect-0.3.58-solver-a.json,
its samples repeated to about ``--mb`` MB), then times ``sniff_format`` beside ``json.loads`` of the whole file
(what recognition cost before: the reader then parsed it a second time). Prints seconds and their ratio.

Run: python benchmarks/bench_sniff.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "tests/importers/fixtures/inspect/inspect-0.3.58-solver-a.json"


def main(mb: int) -> None:
    from scijudge.importers.sniff import sniff_format

    doc = json.loads(FIXTURE.read_text(encoding="utf-8"))
    one = len(json.dumps(doc["samples"][0]))
    copies = max(1, mb * 1_000_000 // one)
    doc["samples"] = [dict(doc["samples"][i % len(doc["samples"])], id=f"s{i}") for i in range(copies)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.json"
        path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        size = path.stat().st_size / 1e6
        start = time.perf_counter()
        found = sniff_format(path)
        sniff_s = time.perf_counter() - start
        start = time.perf_counter()
        json.loads(path.read_bytes())
        parse_s = time.perf_counter() - start
    print(f"{size:.0f} MB inspect log ({copies} samples): sniff_format -> {found!r} in {sniff_s:.3f} s; "
          f"whole-document json.loads {parse_s:.2f} s; parse / sniff = {parse_s / max(sniff_s, 1e-6):.0f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    main(parser.parse_args().mb)
