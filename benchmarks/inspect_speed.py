"""How fast is `edgekit inspect`? Prints ratios measured in this run; writes benchmarks/out/inspect_speed.json.

1. inspect of a ~100 MB model against loading the same model in the LiteRT interpreter;
2. inspect time vs parameter bytes at a fixed op count (should stay ~flat);
3. inspect time vs op count at fixed bytes (should grow ~linearly).

Goal (issue 2): inspect of the ~100 MB model well under 1 s; time grows with ops, not bytes.
Models are synthesized without TensorFlow (tests/tflite_builder.py). Exit code 1 when the goal is missed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of
from edgekit.tflite import model as tflite_model
from tests.tflite_builder import fc_chain


def inspect_time(path: Path) -> float:
    return best_of(lambda: tflite_model.summary(tflite_model.load(path)))


def litert_load_time(path: Path) -> float:
    from ai_edge_litert.interpreter import Interpreter

    return best_of(lambda: Interpreter(model_path=str(path)).allocate_tensors(), repeat=3)


def main() -> int:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:

        def make(name: str, **kw) -> Path:
            p = Path(tmp) / f"{name}.tflite"
            p.write_bytes(fc_chain(**kw))
            return p

        big = make("big", num_ops=8, width=256, padding_bytes=12_500_000)
        small = make("small", num_ops=8, width=256, padding_bytes=125_000)
        ops100 = make("ops100", num_ops=100, width=16)
        ops1000 = make("ops1000", num_ops=1000, width=16)

        out["big_model_mb"] = big.stat().st_size / 1e6
        out["inspect_big_s"] = inspect_time(big)
        out["litert_load_big_s"] = litert_load_time(big)
        out["inspect_small_s"] = inspect_time(small)
        out["inspect_100_ops_s"] = inspect_time(ops100)
        out["inspect_1000_ops_s"] = inspect_time(ops1000)

    print(f"model: {out['big_model_mb']:.0f} MB, 8 ops")
    print(f"  edgekit inspect          {out['inspect_big_s'] * 1000:8.2f} ms")
    print(f"  LiteRT load + allocate   {out['litert_load_big_s'] * 1000:8.2f} ms")
    print(f"  ratio inspect/LiteRT     {out['inspect_big_s'] / out['litert_load_big_s']:8.2f}")
    print(
        f"bytes: 100 MB vs 1 MB at 8 ops     time ratio {out['inspect_big_s'] / out['inspect_small_s']:.2f} (bytes ratio 100)"
    )
    print(
        f"ops: 1000 vs 100 at fixed width     time ratio {out['inspect_1000_ops_s'] / out['inspect_100_ops_s']:.2f} (ops ratio 10)"
    )
    met = out["inspect_big_s"] < 0.25
    print(f"goal: inspect of the 100 MB model well under 1 s (< 0.25 s): {'met' if met else 'NOT met'}")
    dest = REPO / "benchmarks" / "out"
    dest.mkdir(exist_ok=True)
    (dest / "inspect_speed.json").write_text(json.dumps(out, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
