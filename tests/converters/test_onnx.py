"""ONNX models in (issue 32): edgekit's channels-last translation against ONNX Runtime, op by op, and
``edgekit quantize model.onnx`` end to end on the digits CNN written as PyTorch exports it.

The graphs are built here with onnx.helper and fixed numpy weights (tests/converters/onnx_graphs.py): no torch.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.tf

from tests.converters.onnx_graphs import digits_onnx, save  # noqa: E402 (after the importorskips)


def _node(op, ins, outs, **attrs):
    from onnx import helper

    return helper.make_node(op, ins, outs, name=f"/{outs[0]}/{op}", **attrs)


def _weights(seed=0, **shapes):
    rng = np.random.default_rng(seed)
    return {k: rng.normal(0, 0.5, v).astype(np.float32) for k, v in shapes.items()}


def _many_ops(path):
    """One graph with most ops the translator knows, shapes that make channels-first and NHWC differ."""
    w = _weights(
        c1=(8, 3, 3, 3),
        c1b=(8,),
        dw=(8, 1, 3, 3),
        g2=(8, 4, 1, 1),
        shift=(1, 8, 1, 1),
        sub=(6, 1, 1),
        fc=(12, 150),
        mm=(18, 5),
        bng=(8,),
        bnb=(8,),
        bnm=(8,),
    )
    w.update(
        bnv=np.abs(w["bnm"]) + 0.5,
        lo=np.float32(0),
        hi=np.float32(6),
        scales=np.asarray([1, 1, 2, 2], np.float32),
        split=np.asarray([6, 10], np.int64),
        st=np.asarray([2], np.int64),
        en=np.asarray([8], np.int64),
        ax=np.asarray([1], np.int64),
        two=np.float32(2),
        pads=np.asarray([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
    )
    nodes = [
        _node("Conv", ["input", "c1", "c1b"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        _node("BatchNormalization", ["a", "bng", "bnb", "bnm", "bnv"], ["b"]),  # folded into the Conv
        _node("Relu", ["b"], ["c"]),
        _node("Conv", ["c", "dw"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),  # depthwise
        _node("Clip", ["d", "lo", "hi"], ["e"]),  # ReLU6
        _node("Conv", ["e", "g2"], ["f"], kernel_shape=[1, 1], group=2),  # grouped
        _node("Sigmoid", ["f"], ["fs"]),
        _node("Mul", ["f", "fs"], ["g"]),  # SiLU
        _node("BatchNormalization", ["g", "bng", "bnb", "bnm", "bnv"], ["h"]),  # not after a Conv
        _node("HardSwish", ["h"], ["i"]),
        _node("Add", ["i", "shift"], ["j"]),
        _node("LeakyRelu", ["j"], ["k"], alpha=0.1),
        _node("MaxPool", ["k"], ["l"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        _node("Resize", ["l", "", "scales"], ["m"], mode="nearest"),
        _node("Concat", ["k", "m"], ["n"], axis=1),
        _node("Split", ["n", "split"], ["o1", "o2"], axis=1),
        _node("Slice", ["o2", "st", "en", "ax"], ["p"]),
        _node("Mul", ["o1", "p"], ["q"]),
        _node("Div", ["q", "two"], ["r"]),
        _node("Sub", ["r", "sub"], ["s"]),
        _node("Pad", ["s", "pads"], ["t"]),
        _node("AveragePool", ["t"], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
        _node("Flatten", ["u"], ["v"]),
        _node("Gemm", ["v", "fc"], ["x"], transB=1),
        _node("ReduceMean", ["s"], ["y"], axes=[2, 3], keepdims=0),
        _node("Concat", ["x", "y"], ["z"], axis=1),
        _node("MatMul", ["z", "mm"], ["logits"]),
        _node("Softmax", ["logits"], ["output"], axis=-1),
    ]
    return save(nodes, w, path, input_shape=(1, 3, 16, 16), output_shape=(1, 5), opset=14)


def _shape_ops(path):
    """``x.view(x.size(0), -1)`` as torch exports it (Shape, Gather, Unsqueeze, Concat), a Transpose, a reshape."""
    w = _weights(1, c=(4, 3, 3, 3))
    w.update(zero=np.asarray(0, np.int64), minus=np.asarray([-1], np.int64), r3=np.asarray([1, 4, 64], np.int64))
    nodes = [
        _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _node("Reshape", ["a", "r3"], ["a3"]),
        _node("Flatten", ["a3"], ["af"], axis=1),
        _node("Transpose", ["a"], ["b"], perm=[0, 2, 3, 1]),
        _node("Shape", ["b"], ["sh"]),
        _node("Gather", ["sh", "zero"], ["n"], axis=0),
        _node("Unsqueeze", ["n"], ["n1"], axes=[0]),
        _node("Concat", ["n1", "minus"], ["shape"], axis=0),
        _node("Reshape", ["b", "shape"], ["bf"]),
        _node("Add", ["bf", "af"], ["output"]),
    ]
    return save(nodes, w, path, input_shape=(1, 3, 8, 8), output_shape=(1, 256), opset=11)


def _weights_through_a_transpose(path):
    """A Linear as some exporters write it: MatMul with weights stored (out, in) and transposed in the graph."""
    w = _weights(5, c=(4, 3, 3, 3), fc=(7, 4))
    nodes = [
        _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3]),
        _node("GlobalAveragePool", ["a"], ["g"]),
        _node("Flatten", ["g"], ["f"]),
        _node("Transpose", ["fc"], ["fct"], perm=[1, 0]),
        _node("MatMul", ["f", "fct"], ["output"]),
    ]
    return save(nodes, w, path, input_shape=(1, 3, 8, 8), output_shape=(1, 7), opset=13)


def _nhwc_input(path):
    """A tf2onnx-style graph: NHWC input, transposed to NCHW inside: translated with no transpose at all."""
    w = _weights(2, c=(4, 3, 3, 3))
    nodes = [
        _node("Transpose", ["input"], ["x"], perm=[0, 3, 1, 2]),
        _node("Conv", ["x", "c"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
        _node("GlobalAveragePool", ["a"], ["g"]),
        _node("Flatten", ["g"], ["output"]),
    ]
    return save(nodes, w, path, input_shape=(1, 8, 8, 3), output_shape=(1, 4), opset=13)


def _plain_4d(path):
    """A Conv on a 4-D value a Reshape left in ONNX's NCHW order (channels regrouped): one TRANSPOSE, then NHWC."""
    w = _weights(4, c=(4, 3, 3, 3), d=(6, 8, 1, 1))
    w["regroup"] = np.asarray([1, 8, 4, 8], np.int64)
    nodes = [
        _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _node("Reshape", ["a", "regroup"], ["b"]),
        _node("Conv", ["b", "d"], ["e"], kernel_shape=[1, 1]),
        _node("MaxPool", ["e"], ["f"], kernel_shape=[2, 2], strides=[2, 2]),
        _node("GlobalAveragePool", ["f"], ["g"]),
        _node("Flatten", ["g"], ["output"]),
    ]
    return save(nodes, w, path, input_shape=(1, 3, 8, 8), output_shape=(1, 6), opset=13)


@pytest.mark.parametrize("build", [_many_ops, _shape_ops, _nhwc_input, _plain_4d, _weights_through_a_transpose])
def test_the_translation_computes_what_onnx_runtime_computes(build, tmp_path):
    from edgekit.converters import onnx_io

    loaded = onnx_io.load(build(tmp_path / "m.onnx"))
    h, w, c = loaded.input_shape
    x = np.random.default_rng(0).uniform(0, 1, (8, h, w, c)).astype(np.float32)
    note = onnx_io.check_translation(loaded, x)  # raises ConversionError beyond the tolerance
    reference, ours = loaded.predict(x), loaded.translated_predict(x)
    assert np.abs(reference).max() > 0.01 and reference.std() > 1e-3  # a real signal, not zeros
    assert np.abs(reference - ours).max() <= 1e-4 * max(1.0, float(np.abs(reference).max())), note


def test_the_translation_is_traced_once_for_the_check_and_every_conversion(tmp_path, monkeypatch):
    """The translation check and each converter remedy run one traced graph (tracing again, with autograph
    re-parsing every op function, was most of the route's fixed cost), and it computes what ONNX Runtime does."""
    from edgekit.board.preprocess import PreprocessSpec
    from edgekit.converters import onnx_io, onnx_translate
    from edgekit.converters.converter import make_converter

    traces = []
    trace = onnx_translate.Translation.trace
    monkeypatch.setattr(onnx_translate.Translation, "trace", lambda self, x: traces.append(x) or trace(self, x))
    loaded = onnx_io.load(_many_ops(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).uniform(0, 1, (4, 16, 16, 3)).astype(np.float32)
    onnx_io.check_translation(loaded, x)
    spec = PreprocessSpec.with_scaling(16, 16, "0..1")
    for settings in ({}, {"_experimental_disable_per_channel": True}):  # two remedies, two converters
        make_converter(loaded, spec, lambda: iter(()), "uint8", settings)
    assert len(traces) == 1 and tuple(traces[0].shape) == (1, 16, 16, 3)
    assert loaded.concrete_function(16, 16) is loaded.concrete_function(16, 16)
    assert np.allclose(loaded.translated_predict(x), loaded.predict(x), atol=1e-4)


def _ops_of_translation(path, tmp_path):
    """The TFLite op names of the float conversion of the translation (what TensorFlow makes of it)."""
    from edgekit.converters import onnx_io
    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.tflite import model as tflite_model

    tf = import_tensorflow()
    loaded = onnx_io.load(path)
    h, w, _ = loaded.input_shape
    with silenced():
        data = tf.lite.TFLiteConverter.from_concrete_functions([loaded.concrete_function(h, w)]).convert()
    return [op.name for op in tflite_model.ModelInfo.from_bytes(data).main.ops]


def test_a_channels_first_model_is_translated_with_no_transpose(tmp_path):
    assert "TRANSPOSE" not in _ops_of_translation(_many_ops(tmp_path / "m.onnx"), tmp_path)
    assert "TRANSPOSE" not in _ops_of_translation(_nhwc_input(tmp_path / "n.onnx"), tmp_path)


def test_a_translation_that_differs_from_onnx_runtime_is_refused_with_the_numbers(tmp_path, monkeypatch):
    from edgekit.converters import onnx_io, onnx_ops
    from edgekit.errors import ConversionError

    monkeypatch.setitem(onnx_ops.OPS, "LeakyRelu", onnx_ops.unary(lambda x, a: x))  # a wrong translation
    loaded = onnx_io.load(_many_ops(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).uniform(0, 1, (4, 16, 16, 3)).astype(np.float32)
    with pytest.raises(
        ConversionError,
        match=r"does not compute the same function: max \|difference\| [0-9.e-]+ "
        r"against ONNX Runtime on 4 calibration samples",
    ) as err:
        onnx_io.check_translation(loaded, x)
    assert err.value.exit_code == 5


def _quantize(*args):
    result = CliRunner().invoke(cli, ["quantize", *map(str, args), "--json", "--quiet"])
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def _one_line_error(result, code):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) <= 2, result.stderr


def test_an_unsupported_op_is_one_line_naming_op_and_node(tmp_path, digits_folders):
    w = _weights(c=(4, 3, 3, 3))
    path = save(
        [
            _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3]),
            _node("Erf", ["a"], ["e"]),
            _node("GlobalAveragePool", ["e"], ["g"]),
            _node("Flatten", ["g"], ["output"]),
        ],
        w,
        tmp_path / "gelu.onnx",
        output_shape=("N", 4),
    )
    result, _ = _quantize(path, "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "the ONNX op Erf (node '/e/Erf')" in result.stderr and str(path) in result.stderr


def test_attention_is_refused_before_conversion_with_what_to_do(tmp_path, digits_folders):
    w = _weights(c=(4, 3, 1, 1))
    path = save(
        [
            _node("Conv", ["input", "c"], ["a"], kernel_shape=[1, 1]),
            _node("Reshape", ["a", "shape"], ["q"]),
            _node("Transpose", ["q"], ["k"], perm=[0, 2, 1]),
            _node("MatMul", ["q", "k"], ["att"]),
            _node("ReduceMean", ["att"], ["output"], axes=[2], keepdims=0),
        ],
        {**w, "shape": np.asarray([1, 4, 1024], np.int64)},
        tmp_path / "attention.onnx",
        output_shape=(1, 4),
    )
    result, _ = _quantize(path, "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "MatMul (node '/att/MatMul') multiplies two activations (attention)" in result.stderr
    assert "YOLOv8" in result.stderr


def test_a_pytorch_file_is_refused_without_being_read(tmp_path, digits_folders):
    path = tmp_path / "model.pt"
    with zipfile.ZipFile(path, "w") as z:  # torch.save's layout: a zip holding a pickle
        z.writestr("model/data.pkl", b"\x80\x02cos\nsystem\nq\x00.")
    result, _ = _quantize(path, "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "is a PyTorch file" in result.stderr and "torch.onnx.export" in result.stderr


def test_dynamic_height_and_width_need_input_size(tmp_path, digits_keras, digits_folders):
    from edgekit.converters import onnx_io
    from edgekit.errors import UsageError

    w = _weights(c=(4, 3, 3, 3))
    path = save(
        [
            _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3]),
            _node("GlobalAveragePool", ["a"], ["g"]),
            _node("Flatten", ["g"], ["output"]),
        ],
        w,
        tmp_path / "any.onnx",
        input_shape=("N", 3, "H", "W"),
        output_shape=("N", 4),
    )
    with pytest.raises(UsageError, match="input height and width are dynamic") as err:
        onnx_io.load(path)
    assert "--input-size" in err.value.hint
    assert onnx_io.load(path, input_size=(40, 24)).input_shape == (24, 40, 3)


# ------------------------------------------------------------------ the digits CNN as PyTorch exports it
@pytest.fixture(scope="module")
def digits_onnx_model(digits_keras, tmp_path_factory):
    return digits_onnx(digits_keras.model, tmp_path_factory.mktemp("onnx") / "digits.onnx")


def test_quantize_onnx_classifier_keeps_its_accuracy_and_maps_fully(digits_onnx_model, digits_folders):
    from edgekit.converters import onnx_io
    from edgekit.converters.quantize import run_int8
    from edgekit.tflite import model as tflite_model
    from edgekit.training import digits

    result, doc = _quantize(digits_onnx_model, "--calib", digits_folders.train)
    assert result.exit_code == 0, result.output
    assert doc["source"]["format"] == "onnx" and doc["edgetpu"]["verdict"] == "full"
    assert doc["preprocess"]["origin"] == "the labelled calibration data"  # the search decided: no silent guess
    assert any("matches ONNX Runtime" in n for n in doc["notes"])
    out = digits_onnx_model.with_name("digits_int8.tflite")
    info = tflite_model.ModelInfo.from_bytes(out.read_bytes())
    assert "TRANSPOSE" not in {op.name for op in info.main.ops}
    assert list(info.inputs[0].shape) == [1, 32, 32, 3] and info.inputs[0].dtype == "uint8"
    record = json.loads(out.with_name("digits_int8.edgekit.json").read_text())
    assert {"onnx", "onnxruntime"} <= set(record["versions"])
    # the held-out test images, never seen by quantize: int8 within 1 point of the ONNX model run by ONNX Runtime
    x, y, _ = digits.load_folder(digits_folders.test)
    onnx_top1 = np.mean(onnx_io.load(digits_onnx_model).predict(x).argmax(1) == y)
    int8_top1 = np.mean(run_int8(out.read_bytes(), x).argmax(1) == y)
    assert onnx_top1 > 0.9 and onnx_top1 - int8_top1 <= 0.01, (onnx_top1, int8_top1)
    check = CliRunner().invoke(cli, ["check", str(out), "--json"])
    assert json.loads(check.stdout)["verdict"] == "full", check.output


def test_a_ptq_hostile_onnx_model_is_refused_by_the_gate(digits_keras, digits_folders, tmp_path):
    """One hidden unit's range inflated (the next Gemm deflated to match): the same float function in ONNX
    Runtime, a real int8 loss; the gate refuses it as it refuses the Keras twin (tests/converters/test_gate.py)."""
    from edgekit.converters import onnx_io

    x, _, _ = __import__("edgekit.training.digits", fromlist=["x"]).load_folder(digits_folders.train)
    plain = onnx_io.load(digits_onnx(digits_keras.model, tmp_path / "plain.onnx"))
    for factor in (100.0, 110.0, 105.0, 115.0):
        path = digits_onnx(
            digits_keras.model, tmp_path / f"inflated{factor:g}.onnx", inflate=(_widest(plain, x), factor)
        )
        assert np.abs(onnx_io.load(path).predict(x[:20]) - plain.predict(x[:20])).max() < 1e-4  # float unchanged
        result, doc = _quantize(path, "--calib", digits_folders.train, "--scaling", "0..1")
        if result.exit_code == 6:
            break
    assert result.exit_code == 6, result.output
    v = doc["verification"]
    assert v["accuracy_verdict"] == "failed" and v["accuracy_drop_interval"][0] > 1.0
    assert "more than --max-accuracy-drop 1 beyond doubt" in result.stderr


def _widest(loaded, x):
    """The hidden Gemm unit with the largest activation on ``x`` (read from ONNX Runtime's intermediate output)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(loaded.path))
    model.graph.output.append(onnx.helper.make_tensor_value_info("h1", onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    h = np.concatenate([session.run(["h1"], {"input": s.transpose(2, 0, 1)[None]})[0] for s in x[:200]])
    return int(h.max(0).argmax())


# ------------------------------------------------------------------ the other commands recognise the file
def test_check_and_inspect_name_an_onnx_or_pytorch_file_and_the_command_that_takes_it(tmp_path):
    onnx_path = _nhwc_input(tmp_path / "m.onnx")
    pt = tmp_path / "m.pt"
    with zipfile.ZipFile(pt, "w") as z:
        z.writestr("m/data.pkl", b"\x80\x02N.")
    legacy = tmp_path / "old.pth"
    legacy.write_bytes(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.")  # torch's legacy format: a bare pickle
    for command in ("check", "inspect"):
        for path, said, hint in [
            (onnx_path, "is an ONNX model", f"edgekit quantize {onnx_path}"),
            (pt, "is a PyTorch file", "torch.onnx.export"),
            (legacy, "is a Python pickle (a PyTorch file?)", "torch.onnx.export"),
        ]:
            result = CliRunner().invoke(cli, [command, str(path)])
            _one_line_error(result, 3)
            assert said in result.stderr and hint in result.stderr and "damaged" not in result.stderr, result.stderr


def test_doctor_says_whether_the_onnx_extra_is_installed():
    from edgekit.doctor import diagnose as doctor

    with_it = doctor.check_onnx(doctor.Probe(dist_version=lambda d: "1.0"))
    without = doctor.check_onnx(doctor.Probe(dist_version=lambda d: None if d == "onnxruntime" else "1.0"))
    assert "takes ONNX models" in with_it.detail
    assert "onnxruntime not installed" in without.detail and ".[onnx]" in without.detail


def test_quantize_onnx_without_the_extra_names_the_install_command(tmp_path, digits_folders, monkeypatch):
    import sys

    path = _nhwc_input(tmp_path / "m.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    result, _ = _quantize(path, "--calib", digits_folders.train)
    _one_line_error(result, 4)
    assert "pip install onnx onnxruntime, or '.[onnx]' in an edgekit checkout" in result.stderr


# ------------------------------------------------------------------ build, and the API with an onnx.ModelProto
def test_build_takes_an_onnx_model(digits_onnx_model, digits_folders, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "build",
            str(digits_onnx_model),
            "--calib",
            str(digits_folders.train),
            "-o",
            str(tmp_path / "bundle"),
            "--json",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert any(f.endswith(".tflite") for f in json.dumps(manifest["files"]).split('"')), manifest


def test_the_api_takes_an_onnx_modelproto_and_names_it_never_a_temporary_file(tmp_path, digits_folders):
    import onnx

    import edgekit
    from edgekit.errors import InputError, UsageError

    w = _weights(c=(4, 3, 3, 3))
    path = save(
        [
            _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3]),
            _node("Erf", ["a"], ["e"]),
            _node("GlobalAveragePool", ["e"], ["g"]),
            _node("Flatten", ["g"], ["output"]),
        ],
        w,
        tmp_path / "gelu.onnx",
        output_shape=("N", 4),
    )
    proto = onnx.load(str(path))
    with pytest.raises(InputError) as err:
        edgekit.quantize(proto, output=tmp_path / "out.tflite", calib=str(digits_folders.train))
    assert str(err.value).startswith("the onnx.ModelProto 'edgekit_test': the ONNX op Erf"), err.value
    assert "edgekit-onnx-" not in str(err.value) + str(err.value.hint)
    with pytest.raises(UsageError, match="has no file name to put the output beside"):
        edgekit.quantize(proto, calib=str(digits_folders.train))
    assert not (tmp_path / "out.tflite").exists()


# ------------------------------------------------------------------ YOLO from ONNX (Ultralytics' format=onnx)
@pytest.mark.parametrize("form", ["split", "joined"])
def test_a_yolo_head_is_converted_up_to_its_maps_and_decoded_on_the_host(form, tmp_path):
    from edgekit.converters import onnx_io
    from edgekit.converters.tf_quiet import import_tensorflow, silenced
    from edgekit.tflite import model as tflite_model
    from tests.converters.onnx_graphs import yolo_onnx

    loaded = onnx_io.load(yolo_onnx(tmp_path / "yolo.onnx", form=form))
    assert loaded.head is not None and (loaded.head.reg_max, loaded.head.nc, len(loaded.head.boxes)) == (16, 3, 3)
    assert loaded.exporter_scaling == "0..1" and loaded.class_names == ["class0", "class1", "class2"]
    x = np.random.default_rng(0).uniform(0, 1, (6, 64, 64, 3)).astype(np.float32)
    onnx_io.check_translation(loaded, x)  # the two tensors, against ONNX Runtime on the original graph
    assert "matches the ONNX model's own decode" in onnx_io.check_decode(loaded, x)
    tf = import_tensorflow()
    with silenced():
        data = tf.lite.TFLiteConverter.from_concrete_functions([loaded.concrete_function(64, 64)]).convert()
    info = tflite_model.ModelInfo.from_bytes(data)
    ops = {op.name for op in info.main.ops}
    assert "TRANSPOSE" not in ops and "SOFTMAX" not in ops  # no layout change, and the DFL decode is left out
    assert sorted(tuple(t.shape) for t in info.outputs) == [(1, 84, 3), (1, 84, 64)]


def test_the_translation_and_the_host_decode_are_checked_on_one_onnx_runtime_pass(tmp_path, monkeypatch):
    """quantize's checks of a YOLO model run ONNX Runtime once per sample (they ran it three times), and say
    exactly what the checks run one by one say."""
    from edgekit.converters import onnx_io
    from tests.converters.onnx_graphs import yolo_onnx

    loaded = onnx_io.load(yolo_onnx(tmp_path / "yolo.onnx", form="split"))
    x = np.random.default_rng(0).uniform(0, 1, (5, 64, 64, 3)).astype(np.float32)
    separate = [onnx_io.check_translation(loaded, x), onnx_io.check_decode(loaded, x)]
    runs = []
    run = onnx_io.Reference.run
    monkeypatch.setattr(onnx_io.Reference, "run", lambda self, xs, names: runs.append(len(xs)) or run(self, xs, names))
    assert onnx_io.check_against_reference(loaded, x) == separate
    assert runs == [5]


def test_quantize_yolo_onnx_splits_boxes_and_scores_and_passes_the_map_gate(tmp_path, monkeypatch):
    from edgekit.converters import calibration
    from edgekit.detection.data import make_shapes
    from edgekit.tflite import model as tflite_model
    from tests.converters.onnx_graphs import yolo_onnx

    read = []
    load = calibration.load
    monkeypatch.setattr(calibration, "load", lambda *a, **k: read.append(load(*a, **k)) or read[-1])
    make_shapes(tmp_path / "shapes", n_images=40)  # 160x120 images for a 64x64 input
    path = yolo_onnx(tmp_path / "yolo.onnx", form="joined")
    result, doc = _quantize(path, "--calib", tmp_path / "shapes", "--eval", tmp_path / "shapes")
    assert result.exit_code == 0, result.output
    # calibrated and verified on images letterboxed as Ultralytics' predict feeds the model (scaled to 64x48, grey
    # bars of 8 rows above and below), not stretched to 64x64
    (data,) = read
    for px in (data.calib_pixels, data.holdout_pixels):
        assert len(px) and (px[:, :8] == 114).all() and (px[:, -8:] == 114).all() and (px[:, 8:-8] != 114).any()
    assert doc["edgetpu"]["verdict"] == "full" and doc["verification"]["kind"] == "detection"
    assert any("host's decode of the head matches" in n for n in doc["notes"])
    assert doc["preprocess"]["origin"] == "the exporter's metadata in the ONNX file"
    out = tmp_path / "yolo_int8.tflite"
    info = tflite_model.ModelInfo.from_bytes(out.read_bytes())
    boxes, scores = info.outputs
    assert tuple(boxes.shape) == (1, 84, 64) and tuple(scores.shape) == (1, 84, 3)
    assert boxes.quantization.scale != scores.quantization.scale  # each its own int8 scale
    record = json.loads(out.with_name("yolo_int8.edgekit.json").read_text())
    assert record["detection"]["layout"]["kind"] == "split-dfl" and record["labels"] == ["class0", "class1", "class2"]
    assert record["detection"]["letterbox"] is True  # Ultralytics' models take letterboxed images


def test_yolo_with_attention_is_refused_before_conversion(tmp_path, digits_folders):
    from tests.converters.onnx_graphs import yolo_onnx

    result, _ = _quantize(yolo_onnx(tmp_path / "yolo11.onnx", attention=True), "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "MatMul (node '/model.10/attn/MatMul') multiplies two activations (attention)" in result.stderr
    assert "YOLOv8" in result.stderr


# ------------------------------------------------------------------ detectors with a head of their own (item 3)
def _single_grid(path, values: int):
    """A one-grid detector: a stride-8 conv over 64x64 (8x8 cells, one box each), sigmoid, rows of ``values``."""
    w = _weights(3, c=(values, 3, 8, 8))
    w["rows"] = np.asarray([1, 64, values], np.int64)
    return save(
        [
            _node("Conv", ["input", "c"], ["a"], kernel_shape=[8, 8], strides=[8, 8]),
            _node("Sigmoid", ["a"], ["s"]),
            _node("Transpose", ["s"], ["t"], perm=[0, 2, 3, 1]),
            _node("Reshape", ["t", "rows"], ["output"]),
        ],
        w,
        path,
        input_shape=(1, 3, 64, 64),
        output_shape=(1, 64, values),
    )


def test_a_single_grid_head_is_read_for_any_n_that_fits_the_input(tmp_path, digits_folders):
    path = _single_grid(tmp_path / "grid.onnx", 7)  # [1, 64, 5+2]: 8x8 cells, not YOLO's 84 anchors
    result, doc = _quantize(path, "--calib", digits_folders.train, "--scaling", "0..1", "--no-verify")
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "grid_int8.edgekit.json").read_text())
    assert record["detection"]["layout"]["kind"] == "yolov5" and record["detection"]["layout"]["num_classes"] == 2
    assert "one grid, stride 8" in json.dumps(record["detection"]["layout"])


def test_quantize_layout_settles_an_ambiguous_head_and_errors_name_the_users_model(tmp_path, digits_folders):
    path = _single_grid(tmp_path / "six.onnx", 6)  # [1, 64, 6]: end2end rows, or a one-class grid
    result, _ = _quantize(path, "--calib", digits_folders.train, "--scaling", "0..1", "--no-verify")
    _one_line_error(result, 3)
    assert f"the int8 model of {path}: the outputs fit several detection layouts" in result.stderr
    assert "--layout" in result.stderr and "/tmp" not in result.stderr.replace(str(tmp_path), "")
    result, _ = _quantize(
        path, "--calib", digits_folders.train, "--scaling", "0..1", "--no-verify", "--layout", "yolov5"
    )
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "six_int8.edgekit.json").read_text())
    assert record["detection"]["layout"]["kind"] == "yolov5"


def test_layout_on_a_classifier_is_a_usage_error(tmp_path, digits_folders):
    result, _ = _quantize(
        _nhwc_input(tmp_path / "m.onnx"), "--calib", digits_folders.train, "--scaling", "0..1", "--layout", "yolo"
    )
    _one_line_error(result, 2)
    assert "is a classifier" in result.stderr


# ------------------------------------------------------------------ a real torch.onnx.export (tests/fixtures/exports)
EXPORTS = Path(__file__).resolve().parents[1] / "fixtures" / "exports"


def _digits_as_exported(images: np.ndarray) -> np.ndarray:
    """load_digits' 8x8 images (0..16) as make_exports.py feeds them: x 255/16, nearest-upscaled to 32x32, RGB."""
    pixels = np.clip(np.asarray(images, np.float64) * (255 / 16), 0, 255).astype(np.uint8)
    return np.repeat(np.kron(pixels, np.ones((1, 4, 4), np.uint8))[..., None], 3, axis=-1)


@pytest.mark.skipif(
    not (EXPORTS / "digits_cnn_float32.onnx").is_file(),
    reason="needs tests/fixtures/exports/ (the exports branch: make_exports.py's PyTorch CNN)",
)
def test_a_pytorch_exported_classifier_keeps_its_held_out_accuracy(tmp_path):
    from PIL import Image
    from sklearn.datasets import load_digits

    from edgekit.converters import onnx_io
    from edgekit.converters.quantize import run_int8
    from edgekit.tflite import model as tflite_model

    digits = load_digits()
    train = _digits_as_exported(digits.images[:1437])  # make_exports.py trained on 0..1436
    for i, (img, label) in enumerate(zip(train, digits.target[:1437])):
        (tmp_path / "train" / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(tmp_path / "train" / str(label) / f"{i}.png")
    model = tmp_path / "digits_cnn.onnx"
    model.write_bytes((EXPORTS / "digits_cnn_float32.onnx").read_bytes())
    result, doc = _quantize(model, "--calib", tmp_path / "train")
    assert result.exit_code == 0, result.output
    assert doc["edgetpu"]["verdict"] == "full" and doc["preprocess"]["std"] == [255.0], doc["preprocess"]
    out = (tmp_path / "digits_cnn_int8.tflite").read_bytes()
    assert "TRANSPOSE" not in {op.name for op in tflite_model.ModelInfo.from_bytes(out).main.ops}
    held = np.load(EXPORTS / "digits_heldout_8x8.npz")
    x, y = _digits_as_exported(held["images"]).astype(np.float32) / 255.0, held["labels"]
    onnx_top1 = np.mean(onnx_io.load(model).predict(x).argmax(1) == y)
    int8_top1 = np.mean(run_int8(out, x).argmax(1) == y)
    assert abs(onnx_top1 - 0.925) < 0.003, onnx_top1  # the manifest's number: the same model
    assert onnx_top1 - int8_top1 <= 0.01, (onnx_top1, int8_top1)


def test_a_damaged_onnx_file_and_weights_outside_its_folder_are_refused(tmp_path, digits_folders):
    import onnx
    from onnx.external_data_helper import set_external_data

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(range(256)) * 4)
    result, _ = _quantize(bad, "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "not a valid ONNX model" in result.stderr or "has no graph" in result.stderr

    model = onnx.load(str(_nhwc_input(tmp_path / "m.onnx")))
    weight = model.graph.initializer[0]
    set_external_data(weight, location="../../etc/passwd")  # a hostile file pointing outside its folder
    weight.ClearField("raw_data")
    weight.data_location = onnx.TensorProto.EXTERNAL
    (tmp_path / "sub").mkdir()
    hostile = tmp_path / "sub" / "hostile.onnx"
    hostile.write_bytes(model.SerializeToString())
    result, _ = _quantize(hostile, "--calib", digits_folders.train)
    _one_line_error(result, 3)
    assert "points outside the model's folder" in result.stderr


def _c2f_splits(path):
    """YOLOv8's C2f splits its channels in halves (sizes [4, 4]); other models split unevenly ([2, 6])."""
    w = _weights(6, c=(8, 3, 3, 3))
    w.update(halves=np.asarray([4, 4], np.int64), uneven=np.asarray([2, 6], np.int64))
    nodes = [
        _node("Conv", ["input", "c"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _node("Split", ["a", "halves"], ["h1", "h2"], axis=1),
        _node("Split", ["a", "uneven"], ["u1", "u2"], axis=1),
        _node("Concat", ["h2", "u1", "h1", "u2"], ["output"], axis=1),
    ]
    return save(nodes, w, path, input_shape=(1, 3, 8, 8), output_shape=(1, 16, 8, 8), opset=13)


def test_split_is_translated_to_ops_the_edge_tpu_maps(tmp_path):
    """tf.split with sizes writes SPLIT_V, which the Edge TPU does not map: the trained YOLOv8 fixture's eight C2f
    splits left 217 of its 229 ops on the CPU. Equal parts now give SPLIT, unequal ones a SLICE each."""
    import tensorflow as tf

    from edgekit.converters import onnx_io
    from edgekit.tflite import model as tflite_model

    loaded = onnx_io.load(_c2f_splits(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).uniform(0, 1, (4, 8, 8, 3)).astype(np.float32)
    onnx_io.check_translation(loaded, x)
    cf = tf.function(loaded.call).get_concrete_function(tf.TensorSpec([1, 8, 8, 3], tf.float32))
    ops = {
        op.name
        for op in tflite_model.ModelInfo.from_bytes(tf.lite.TFLiteConverter.from_concrete_functions([cf]).convert()).ops
    }
    assert "SPLIT" in ops and "SLICE" in ops and "SPLIT_V" not in ops, ops
