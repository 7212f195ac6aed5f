"""How often does `edgekit check` agree with the real edgetpu_compiler? Prints agreement on compiled pairs.

A compiled pair is ``X.tflite`` beside ``X_edgetpu.tflite`` made from it by the real compiler. For
each pair, check predicts the CPU model; the compiled model shows which ops the compiler left on
the CPU (every builtin op still in it) and how many Edge TPU subgraphs it made. Scores:

* op placement: per op type, the ops check puts on the CPU against the ops the compiler left there;
  a pair scores (ops - sum over types of |predicted - actual|) / ops, the total weights pairs by ops;
* verdict: ``full`` (nothing left on the CPU), ``none`` (no Edge TPU subgraph) or ``partial``.

A compiled file with several ``edgetpu-custom-op`` was compiled with ``-a`` (a default compile
makes one Edge TPU subgraph), so that pair is checked with ``multiple_subgraphs=True``; a compiler
log beside the pair (``X_edgetpu.log``) naming compiler 15 or older means that compiler's default
runtime, 13 (coral.ai compiler/runtime table), so that pair is checked with ``min_runtime=13``
(``--default-flags`` turns both off).

    python benchmarks/check_fidelity.py [FOLDER ...] [--json] [--default-flags]

Default folders: ../shared/testdata and ../shared/testdata/pairs. Exit code 1 when no pair is found.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edgekit.converters.fidelity import find_pairs, format_rows, score_pair, summarize  # noqa: E402

DEFAULT_FOLDERS = [REPO.parent / "shared" / "testdata", REPO.parent / "shared" / "testdata" / "pairs"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", type=Path, help="folders holding X.tflite + X_edgetpu.tflite pairs")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--default-flags", action="store_true",
                    help="check every pair as a default compile (do not infer -a from the compiled file)")
    args = ap.parse_args(argv)
    pairs = find_pairs(args.folders or DEFAULT_FOLDERS)
    if not pairs:
        print("error: no compiled pairs (X.tflite beside X_edgetpu.tflite) found (give folders holding them)",
              file=sys.stderr)
        return 1
    rows = [score_pair(c, e, not args.default_flags) for c, e in pairs]
    print(json.dumps({"summary": summarize(rows), "pairs": rows}, indent=1) if args.json else format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
