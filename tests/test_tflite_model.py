"""edgekit.tflite.model against the real interpreter, on every real model in ../shared/testdata."""

from __future__ import annotations

import pytest

from edgekit.errors import InputError, InvalidModelError
from edgekit.tflite import model as tflite_model
from tests.conftest import shared_file, shared_models

MODELS = shared_models()


def _interpreter_ops(path) -> list[str]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interp = Interpreter(
        model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    )
    return [d["op_name"] for d in interp._get_ops_details()]


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_ops_match_the_real_interpreter(path):
    info = tflite_model.load(path)
    ours = [op.custom_code if op.name == "CUSTOM" else op.name for op in info.ops]
    assert ours == _interpreter_ops(path)


@pytest.mark.parametrize("path", MODELS, ids=[p.name for p in MODELS])
def test_io_tensors_match_the_real_interpreter(path):
    from ai_edge_litert.interpreter import Interpreter

    info = tflite_model.load(path)
    interp = Interpreter(model_path=str(path))
    for ours, theirs in [(info.inputs, interp.get_input_details()), (info.outputs, interp.get_output_details())]:
        assert [t.name for t in ours] == [d["name"] for d in theirs]
        assert [list(t.shape) for t in ours] == [d["shape"].tolist() for d in theirs]
        assert [list(t.shape_signature) for t in ours] == [d["shape_signature"].tolist() for d in theirs]
        assert [t.dtype for t in ours] == [d["dtype"].__name__ for d in theirs]
        for t, d in zip(ours, theirs):
            scale, zp = d["quantization"]
            assert (t.quantization.scale if t.quantization else 0.0) == pytest.approx(scale)
            assert (t.quantization.zero_point if t.quantization else 0) == zp


def test_compiled_pair_is_told_apart():
    cpu = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant.tflite"))
    tpu = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    assert not cpu.is_compiled and tpu.is_compiled
    assert [op.custom_code for op in tpu.ops] == ["edgetpu-custom-op"]
    assert cpu.quantization_state == "full-int8"
    assert cpu.min_runtime_version == "1.5.0"
    assert cpu.op_histogram()[("CONV_2D", 1)] == 15
    # weights of 0.25-width MobileNet v1: ~470k parameters at one byte each, plus int32 biases
    assert 400_000 < cpu.param_bytes < 600_000


def test_constant_values_are_readable():
    info = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant.tflite"))
    conv = info.ops[0]
    weights = info.tensors[conv.inputs[1]]
    arr = info.constant_value(weights)
    assert arr.shape == weights.shape and arr.dtype.name == "uint8"
    assert info.constant_value(info.inputs[0]) is None
    assert conv.options["stride_w"] == 2 and conv.options["dilation_w_factor"] == 1


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "too small"),
        (b"\x00" * 7, "too small"),
        (b"\x10\x00\x00\x00TFL2" + b"\x00" * 32, "file identifier"),
        (b"\xff\xff\xff\x7fTFL3" + b"\x00" * 32, "outside the file"),
    ],
)
def test_garbage_is_refused_with_our_error(data, why):
    with pytest.raises(InvalidModelError, match=why) as exc:
        tflite_model.ModelInfo.from_bytes(data)
    assert str(exc.value).startswith("not a valid TFLite model: ")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        tflite_model.load(tmp_path / "absent.tflite")
    with pytest.raises(InputError, match="is a folder, not a .tflite file"):
        tflite_model.load(tmp_path)


def test_compiled_program_bytes_are_reported():
    info = tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    # the compiled program carries the ~470 KB of weights that left the CPU model's buffers
    assert info.param_bytes == 0 and 470_000 < info.edgetpu_bytes < info.size_bytes
    assert tflite_model.load(shared_file("mobilenet_v1_0.25_128_quant.tflite")).edgetpu_bytes == 0


def test_inspect_shows_the_exporters_metadata(tmp_path):
    """issue 35: inspect shows what detect relies on: Ultralytics' packed metadata.json (names, imgsz, stride, task,
    version), TFLite metadata's name/description, and edgekit's own record, in the text and in --json."""
    import json

    from click.testing import CliRunner

    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.cli.app import cli
    from edgekit.results.inspect import InspectResult
    from edgekit.tflite.model_record import ModelRecord
    from tests.detection_models import slice_model, with_ultralytics_metadata

    model = tmp_path / "yolo.tflite"
    model.write_bytes(
        with_ultralytics_metadata(slice_model((64, 64), [{"shape": [1, 7, 84]}]), ["a", "b", "c"], (64, 64))
    )
    res = CliRunner().invoke(cli, ["inspect", str(model), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    u = doc["exporter"]["ultralytics"]
    assert (u["task"], u["imgsz"], u["stride"], u["version"]) == ("detect", [64, 64], 32, "8.3.0")
    assert u["names"] == ["a", "b", "c"] and doc["exporter"]["edgekit"] is None
    assert InspectResult.from_dict(doc).to_dict() == doc
    text = CliRunner().invoke(cli, ["inspect", str(model)]).stdout
    assert (
        "Ultralytics metadata.json: task detect, imgsz 64x64, stride 32, version 8.3.0, 3 class names (a, b, c)" in text
    )
    plain = tmp_path / "plain.tflite"
    plain.write_bytes(slice_model((64, 64), [{"shape": [1, 7, 84]}]))
    rec = ModelRecord(PreprocessSpec(64, 64, "RGB", "lanczos", (0.0,), (255.0,)), ["a", "b", "c"], {"source": "x.h5"})
    (tmp_path / "plain.edgekit.json").write_text(rec.to_json())
    doc = json.loads(CliRunner().invoke(cli, ["inspect", str(plain), "--json"]).stdout)
    e = doc["exporter"]["edgekit"]
    assert e["found_in"].endswith("plain.edgekit.json") and e["provenance"] == {"source": "x.h5"}
    assert e["preprocess"]["std"] == [255.0] and e["labels"] == 3 and doc["exporter"]["ultralytics"] is None
    assert "edgekit record: from" in CliRunner().invoke(cli, ["inspect", str(plain)]).stdout


def test_inspect_shows_the_real_exports_metadata():
    import json

    from click.testing import CliRunner

    from edgekit.cli.app import cli
    from tests.conftest import shared_file

    yolo = shared_file("detection/ppe_yolov8n_full_integer_quant.tflite")
    labels = shared_file("detection/ppe_yolov8n_labels.txt").read_text().split()
    u = json.loads(CliRunner().invoke(cli, ["inspect", str(yolo), "--json"]).stdout)["exporter"]["ultralytics"]
    assert u["names"] == labels and u["task"] == "detect" and u["imgsz"] == [640, 640]
    c = json.loads(CliRunner().invoke(cli, ["inspect", str(yolo), "--json"]).stdout)["exporter"]["converter"]
    assert c == {"description": "MLIR Converted.", "tensorflow_version": "2.18.0", "api_version": 2}  # its onnx2tf
    mobilenet = shared_file("mobilenet_v1_0.25_128_quant.tflite")
    t = json.loads(CliRunner().invoke(cli, ["inspect", str(mobilenet), "--json"]).stdout)["exporter"]
    assert t["tflite_metadata"]["name"] == "ImageClassifier" and t["ultralytics"] is None


def test_inspect_says_damaged_exporter_metadata_and_goes_on(tmp_path):
    """A packed metadata.json that is no JSON object, values of the wrong type, a broken sidecar record: each part
    says what is wrong (or leaves the value null), and inspect still reports the model (exit 0)."""
    import io
    import json
    import zipfile

    from click.testing import CliRunner

    from edgekit.cli.app import cli
    from tests.detection_models import slice_model

    def packed(text: str) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("metadata.json", text)
        return slice_model((64, 64), [{"shape": [1, 7, 84]}]) + buf.getvalue()

    (tmp_path / "a.tflite").write_bytes(packed("[1, 2]"))
    (tmp_path / "b.tflite").write_bytes(
        packed(json.dumps({"task": "detect", "stride": "32", "imgsz": "640", "names": ["x"], "end2end": 1}))
    )
    (tmp_path / "b.edgekit.json").write_text("{not json")
    a = CliRunner().invoke(cli, ["inspect", str(tmp_path / "a.tflite"), "--json"])
    assert (
        a.exit_code == 0
        and json.loads(a.stdout)["exporter"]["ultralytics"]["error"] == "metadata.json is not a JSON object"
    )
    b = CliRunner().invoke(cli, ["inspect", str(tmp_path / "b.tflite"), "--json"])
    u, e = (json.loads(b.stdout)["exporter"][k] for k in ("ultralytics", "edgekit"))
    assert b.exit_code == 0 and (u["task"], u["names"], u["stride"], u["imgsz"], u["end2end"]) == (
        "detect",
        ["x"],
        None,
        None,
        None,
    )
    assert "edgekit record" in e["error"] and e["found_in"] is None
