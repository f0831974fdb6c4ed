"""Benchmark: load the whole corpus through corral's loader vs a plain parse.

The baseline is what a naive loader does with the same files: read, split off
the YAML header and ``yaml.safe_load`` it (``json.loads`` / ``tomllib.loads``
for JSON and TOML files), errors ignored. corral's loader does that and more:
bounded symlink-free reads, strict YAML (duplicates, aliases, tags), the
lenient fallback, field validation, tool mapping and contract building.

    python scripts/bench_loader.py [--corpus tests/corpus] [--repeat 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import Row, compare, filesystem, machine, print_rows

from policies.loader.corpus import entries, load_corpus

REPO = Path(__file__).resolve().parent.parent


def plain(corpus: Path) -> int:
    """Parse every file the naive way; return how many parsed."""
    parsed = 0
    for row in entries(corpus):
        text = (corpus / row.saved_file).read_text(encoding="utf-8", errors="replace")
        try:
            if row.saved_file.endswith(".json"):
                json.loads(text)
            elif row.saved_file.endswith(".toml"):
                tomllib.loads(text)
            else:
                parts = text.replace("\r\n", "\n").split("\n---", 1)
                yaml.safe_load(parts[0].removeprefix("---\n")) if len(parts) == 2 else None
            parsed += 1
        except (yaml.YAMLError, ValueError):
            pass
    return parsed


def corral(corpus: Path) -> int:
    """Load every file with corral's loader; return how many loaded agents."""
    return sum(len(outcome.agents) for _, outcome in load_corpus(corpus))


def run_bench(*, corpus: Path = REPO / "tests" / "corpus", trials: int = 9) -> list[Row]:
    """Both sides warmed, interleaved (``scripts/benchlib.py``)."""
    files = len(entries(corpus))
    plain_cell, corral_cell = compare(lambda: plain(corpus), lambda: corral(corpus),
                                      trials=trials)
    return [Row("loader (in process)", f"the corpus through the loader ({files} files)",
                "read + yaml.safe_load / json / tomllib of the same files", plain_cell,
                corral_cell, filesystem(corpus))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "corpus")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 trials")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    files = len(entries(args.corpus))
    [row] = run_bench(corpus=args.corpus, trials=3 if args.quick else args.repeat)
    result = {
        "files": files,
        "plain_us_per_file": round(row.plain.median / files * 1e6, 1),
        "corral_us_per_file": round(row.corral.median / files * 1e6, 1),
        "ratio": round(row.ratio, 2),
        "repeat": len(row.plain.samples),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"machine: {machine()}")
    print_rows([row])
    print(f"per file: {result['plain_us_per_file']} vs {result['corral_us_per_file']} us")


if __name__ == "__main__":
    sys.exit(main())
