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
import statistics
import sys
import time
import tomllib
from pathlib import Path

import yaml

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


def measure(func: object, corpus: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func(corpus)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO / "tests" / "corpus")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    files = len(entries(args.corpus))
    corral(args.corpus)  # warm imports and caches
    base = statistics.median(measure(plain, args.corpus, args.repeat))
    ours = statistics.median(measure(corral, args.corpus, args.repeat))
    result = {
        "files": files,
        "plain_us_per_file": round(base / files * 1e6, 1),
        "corral_us_per_file": round(ours / files * 1e6, 1),
        "ratio": round(ours / base, 2),
        "repeat": args.repeat,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"corpus: {files} files, median of {args.repeat} runs")
    print(f"  plain yaml.safe_load / json / toml : {result['plain_us_per_file']:8.1f} us/file")
    print(f"  corral loader (full contracts)     : {result['corral_us_per_file']:8.1f} us/file")
    print(f"  ratio                              : {result['ratio']:8.2f}x")


if __name__ == "__main__":
    sys.exit(main())
