"""Derive the evidence ledger's test files from the public pairs it names, where they are at hand.

    python benchmarks/evidence_pairs.py [--files DIR] [--add CANDIDATES.tsv ...] [--audit]

For every row of ``tests/fixtures/evidence/SOURCES.tsv`` (and every candidate row given with
``--add``, appended to the ledger when it passes), reads ``DIR/owner+name/<model_path>`` and
``<compiled_path>`` (and the log, where the row names one), checks that the compiled model was made
from that CPU model (:func:`edgekit.edgetpu.fidelity.pair_problem`), and writes under
``tests/fixtures/evidence/pairs/``:

* ``<id>.tflite.gz``: the CPU model with its weights zeroed (:func:`~edgekit.edgetpu.fidelity.weightless`);
* ``<id>.json``: the compiler's placement, read from the compiled model and the log.

A weightless copy must score exactly as its original does; a pair where it does not is refused.
``DIR`` defaults to ``../shared/evidence/files`` (where the fetched repositories' files are kept;
nothing of them but these derived files enters the repository). Rows whose files are absent are
left as they are. Prints what it did, the regression table and its figures on each part of the ledger
(fitting, validation: :func:`~edgekit.edgetpu.fidelity.ledger_part`); ``--audit`` also prints, per rule,
the pairs that agree with it and the ones that contradict it (:func:`~edgekit.edgetpu.fidelity.rule_evidence`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edgekit.edgetpu.fidelity import (
    LEDGER_COLUMNS,
    format_parts,
    format_rows,
    ledger_pairs,
    ledger_part,
    pair_files,
    pair_id,
    pair_problem,
    placement,
    read_ledger,
    rule_evidence,
    score,
    score_ledger,
    weightless,
)
from edgekit.errors import EdgekitError
from edgekit.tflite import model as tflite_model

LEDGER = REPO / "tests" / "fixtures" / "evidence"
DEFAULT_FILES = REPO.parent / "shared" / "evidence" / "files"
RESERVED = REPO.parent / "shared" / "testdata" / "RESERVED.md"


# Coral's own published models (coral.ai/models, google-coral/test_data: reserved for measurement),
# which public repositories copy; a retrained model keeping such a name (e.g. mobilenet_v2_1.0_224_quant
# with 5 classes) is the user's own and stays.
CORAL_MODELS = re.compile(
    r"inat_(bird|insect|plant)|coco17_ptq|coco_quant_postprocess|ssdlite_mobiledet|"
    r"efficientnet-edgetpu|inception_v\d_\d+_quant|deeplabv3_mnv2|efficientdet_lite\d|"
    r"movenet_|posenet_mobilenet|bodypix_|yamnet|keras_post_training_unet"
)


def reserved() -> set[str]:
    if not RESERVED.is_file():
        return set()
    return {
        line.strip()
        for line in RESERVED.read_text().splitlines()
        if line.strip().count("/") == 1 and " " not in line.strip()
    }


def derive(row: dict[str, str], files: Path, seen: dict[str, str]) -> str | None:
    """Write the derived files of one row; None when done, else why not (``seen``: CPU model sha256 -> row)."""
    if CORAL_MODELS.search(row["model_path"]):
        return "a copy of one of Coral's published models (reserved for independent measurement)"
    base = files / row["repo"].replace("/", "+")
    cpu_path, compiled_path = base / row["model_path"], base / row["compiled_path"]
    if not (cpu_path.is_file() and compiled_path.is_file()):
        return "files not at hand"
    log_text = None
    if row["log"] != "-":
        log = base / row["log"].split("#")[0]
        excerpt = compiled_path.with_name(compiled_path.name + ".log.txt")
        log = excerpt if "#" in row["log"] and excerpt.is_file() else log
        log_text = log.read_text(errors="replace") if log.is_file() else None
    data = cpu_path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if seen.setdefault(digest, f"{row['repo']} {row['model_path']}") != f"{row['repo']} {row['model_path']}":
        return f"the same CPU model as {seen[digest]}"
    try:
        cpu, compiled = tflite_model.ModelInfo.from_bytes(data), tflite_model.load(compiled_path)
        why = pair_problem(cpu, compiled)
        if why:
            return why
        actual = placement(cpu, compiled, log_text)
        light = weightless(data)
        name = pair_id(row["repo"], row["model_path"])
        if score(name, cpu, actual) != score(name, tflite_model.ModelInfo.from_bytes(light), actual):
            return "its weightless copy does not score as the original does"
    except EdgekitError as exc:
        return f"unreadable: {exc.message}"
    if actual.compiler_version and row["compiler_version"] in ("", "unknown"):
        row["compiler_version"] = actual.compiler_version
    gz, placement_json = pair_files(LEDGER, row)
    gz.write_bytes(gzip.compress(light, 9, mtime=0))
    placement_json.write_text(
        json.dumps({k: row[k] for k in LEDGER_COLUMNS} | {"sha256": digest} | actual.to_dict(), indent=1) + "\n"
    )
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=Path, default=DEFAULT_FILES, help="folder of owner+name/ repository files")
    ap.add_argument("--add", type=Path, nargs="*", default=[], help="candidate rows (the ledger's columns, no header)")
    ap.add_argument("--audit", action="store_true", help="print, per rule, the pairs that agree and contradict")
    args = ap.parse_args(argv)
    (LEDGER / "pairs").mkdir(parents=True, exist_ok=True)
    rows = read_ledger(LEDGER) if (LEDGER / "SOURCES.tsv").is_file() else []
    known = {(r["repo"], r["model_path"]) for r in rows}
    candidates = []
    for path in args.add:
        for values in csv.reader(path.read_text().splitlines(), delimiter="\t"):
            if len(values) >= len(LEDGER_COLUMNS) and (values[0], values[2]) not in known:
                candidates.append(dict(zip(LEDGER_COLUMNS, (v.strip() for v in values))))
                known.add((values[0], values[2]))
    banned = reserved()
    kept, seen = [], {}
    for row in rows + candidates:
        if row["repo"] in banned:
            print(f"refused {row['repo']}: reserved for independent measurement ({RESERVED.name})")
            continue
        why = derive(row, args.files, seen)
        if why and (row in candidates or why != "files not at hand"):
            print(f"skipped {row['repo']} {row['model_path']}: {why}")
            continue
        if why:
            print(f"kept as it is {row['repo']} {row['model_path']}: {why}")
        kept.append(row)
    kept.sort(key=lambda r: (r["repo"].lower(), r["model_path"]))
    wanted = {path for r in kept for path in pair_files(LEDGER, r)}
    for stale in set((LEDGER / "pairs").iterdir()) - wanted:  # derived files of rows no longer in the ledger
        stale.unlink()
    with open(LEDGER / "SOURCES.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, LEDGER_COLUMNS, delimiter="\t", lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(kept)
    rows = score_ledger(LEDGER)
    print(format_rows(rows))
    print(format_parts(rows))
    print(f"{len(kept)} pairs from {len({r['repo'] for r in kept})} repositories in {LEDGER / 'SOURCES.tsv'}")
    for row in candidates:
        if row in kept:
            print(f"added {row['repo']} {row['model_path']} to the {ledger_part(row['repo'])} part")
    if args.audit:
        pairs = [(pair_id(row["repo"], row["model_path"]), cpu, actual) for row, cpu, actual in ledger_pairs(LEDGER)]
        for rule, seen in sorted(rule_evidence(pairs).items()):
            print(
                f"{rule:<44} agree {len(seen['agrees']):>3}  contradict {len(seen['contradicts']):>3}  "
                + " ".join(seen["contradicts"][:3])
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
