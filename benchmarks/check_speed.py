"""How fast is `edgekit check`? Prints numbers and ratios measured in this run; writes benchmarks/out/check_speed.json.

1. load + check of a ~4 MB int8 CNN (synthesized CONV_2D chain), after import: goal < 100 ms;
2. the same on the real deeplabv3 model from ../shared/testdata, when present;
3. time vs op count at a fixed width (250 ... 2000 ops): should grow ~linearly, i.e. the time per
   op stays flat (ratio of time ratios to op ratios ~1);
4. the same for a chain whose second half is cut off the Edge TPU (1,000 ... 8,000 ops), against the
   time to read the same model: check stays within a small multiple of reading (it was quadratic in
   the cut-off ops: 166 s on a 150,000-op model that inspect reads in 15 s).

Models are synthesized with the flatbuffer object API of ai-edge-litert (tests/tflite_builder.py),
no TensorFlow. Exit code 1 when a goal is not met.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.timing import best_of
from edgekit.edgetpu.compatibility import check_model
from edgekit.tflite import model as tflite_model
from tests.tflite_builder import conv_chain, cut_chain


def check_time(path: Path) -> float:
    return best_of(lambda: check_model(tflite_model.load(path)))


def main() -> int:
    out: dict[str, object] = {}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        four_mb = Path(tmp) / "cnn_4mb.tflite"
        four_mb.write_bytes(conv_chain(108, channels=64, size=16))
        n_ops = len(tflite_model.load(four_mb).ops)
        out["model_4mb_bytes"] = four_mb.stat().st_size
        out["model_4mb_ops"] = n_ops
        out["check_4mb_s"] = t4 = check_time(four_mb)
        print(
            f"~4 MB model: {four_mb.stat().st_size / 1e6:.2f} MB, {n_ops} ops: load + check {t4 * 1000:.1f} ms "
            f"(goal < 100 ms: {'met' if t4 < 0.1 else 'NOT met'})"
        )
        ok &= t4 < 0.1

        deeplab = REPO.parent / "shared" / "testdata" / "deeplabv3_mnv2_dm05_pascal_quant.tflite"
        if deeplab.exists():
            out["check_deeplab_s"] = td = check_time(deeplab)
            print(f"deeplabv3 (real, {deeplab.stat().st_size / 1e6:.2f} MB, 72 ops): load + check {td * 1000:.1f} ms")

        counts = [250, 500, 1000, 2000]
        times = []
        for n in counts:
            p = Path(tmp) / f"ops_{n}.tflite"
            p.write_bytes(conv_chain(n, channels=8, size=8))
            times.append(check_time(p))
        out["ops_scaling"] = [{"convs": n, "seconds": t} for n, t in zip(counts, times)]
        print("op count vs time (CONV_2D chain, 8 channels):")
        for n, t in zip(counts, times):
            print(f"  {n + 4:5d} ops  {t * 1000:8.2f} ms  {t / (n + 4) * 1e6:6.2f} us/op")
        ratios = []
        for (n0, t0), (n1, t1) in zip(zip(counts, times), list(zip(counts, times))[1:]):
            r = (t1 / t0) / ((n1 + 4) / (n0 + 4))
            ratios.append(r)
            print(
                f"  {n1 + 4} vs {n0 + 4} ops: time ratio {t1 / t0:.2f} for an op ratio {(n1 + 4) / (n0 + 4):.2f} "
                f"(time/op ratio {r:.2f}; 1.00 = linear)"
            )
        overall = (times[-1] / times[0]) / ((counts[-1] + 4) / (counts[0] + 4))
        print(f"  {counts[-1] + 4} vs {counts[0] + 4} ops overall: time/op ratio {overall:.2f} (1.00 = linear)")
        linear = 0.7 < overall < 1.4 and all(0.5 < r < 2.0 for r in ratios)
        out["linearity_ratios"] = ratios
        out["linearity_overall"] = overall
        print(f"goal: time grows linearly with the op count: {'met' if linear else 'NOT met'}")
        ok &= linear

        print("cut-off chain: check vs reading the same model:")
        cut_rows = []
        for n in (1000, 2000, 4000, 8000):
            data = cut_chain(n)
            read = best_of(lambda data=data: tflite_model.ModelInfo.from_bytes(data))
            info = tflite_model.ModelInfo.from_bytes(data)
            t = best_of(lambda info=info: check_model(info))
            cut_rows.append({"ops": n, "read_s": read, "check_s": t, "ratio": t / read})
            print(f"  {n:5d} ops  read {read * 1000:8.1f} ms  check {t * 1000:8.1f} ms  check/read {t / read:5.2f}")
        out["cut_chain"] = cut_rows
        flat = cut_rows[-1]["ratio"] < 3.0  # quadratic, it was ~7 at 6,000 ops and ~11 at 150,000
        print(f"goal: check within 3x reading the model at {cut_rows[-1]['ops']} ops: {'met' if flat else 'NOT met'}")
        ok &= flat
    dest = Path(__file__).resolve().parent / "out"
    dest.mkdir(exist_ok=True)
    (dest / "check_speed.json").write_text(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
