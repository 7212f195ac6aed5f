"""check's advice for the source the model came from (issue 35, item 6): YOLO11/26's attention block, UpSampling2D's
TILE named with its layer, PyTorch lowering patterns (litert-torch, onnx2tf) told apart from Keras layers, and no
advice naming a command that cannot take the model (``edgekit quantize`` never takes a .tflite)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from edgekit.cli.app import cli
from edgekit.edgetpu import advice
from edgekit.edgetpu.advice import Source
from edgekit.tflite import model as tflite_model
from tests.detection_models import with_ultralytics_metadata
from tests.tflite_builder import GraphBuilder


def check(path) -> tuple[str, dict]:
    text = CliRunner().invoke(cli, ["check", str(path)])
    doc = CliRunner().invoke(cli, ["check", str(path), "--json"])
    assert text.exit_code == 0 and doc.exit_code == 0, text.output + doc.output
    return text.stdout, json.loads(doc.stdout)


def float_io_model(prefix: str = "model") -> bytes:
    """Float input -> QUANTIZE -> int8 CONV_2D -> DEQUANTIZE -> float output: the float-I/O int8 model Ultralytics'
    LiteRT export, onnx2tf's *_integer_quant and litert-torch's quantized exports write. ``prefix`` names the
    tensors as an exporter would."""
    g = GraphBuilder()
    x = g.tensor([1, 16, 16, 3], "float32", scale=None, name="serving_default_images:0")
    q = g.tensor([1, 16, 16, 3], "int8", scale=1 / 255, zero_point=-128, name=f"{prefix}/quantize")
    g.op("QUANTIZE", [x], [q])
    w = g.tensor([4, 3, 3, 3], "int8", data=np.ones((4, 3, 3, 3)), scale=0.01)
    b = g.tensor([4], "int32", data=np.zeros(4), scale=0.01 / 255)
    y = g.tensor([1, 16, 16, 4], "int8", scale=0.05, name=f"{prefix}/conv")
    g.op("CONV_2D", [q, w, b], [y], version=3, padding=0, stride_w=1, stride_h=1)
    out = g.tensor([1, 16, 16, 4], "float32", scale=None, name="Identity")
    g.op("DEQUANTIZE", [y], [out], version=2)
    return g.build([x], [out])


def test_an_ultralytics_float_io_int8_export_is_never_told_to_run_edgekit_quantize(tmp_path):
    """Was: 'use integer (uint8/int8) model inputs: `edgekit quantize` makes them' for Ultralytics' *_int8.tflite,
    a model quantize cannot take."""
    path = tmp_path / "yolo11n_int8.tflite"
    path.write_bytes(with_ultralytics_metadata(float_io_model(), ["person"], (16, 16)))
    text, doc = check(path)
    for said in (text, json.dumps(doc)):  # quantize takes the ONNX re-export, never this .tflite
        assert said.count("edgekit quantize") == said.count("edgekit quantize model.onnx"), said
    assert "format=edgetpu" in text and doc["problems"]
    assert all("format=edgetpu" in p["hint"] for p in doc["problems"] if p["hint"] and "integer" in p["hint"])


def test_an_onnx2tf_float_io_export_is_pointed_at_its_full_integer_twin(tmp_path):
    path = tmp_path / "model_integer_quant.tflite"
    path.write_bytes(float_io_model("model/tf.nn.convolution"))
    text, _doc = check(path)
    assert "edgekit quantize`" not in text and "*_full_integer_quant.tflite" in text


def test_a_keras_model_keeps_the_quantize_advice(tmp_path):
    path = tmp_path / "keras_float_io.tflite"
    path.write_bytes(float_io_model("sequential/conv2d"))
    assert advice.model_source(tflite_model.load(path))[0] == Source.KERAS
    assert "`edgekit quantize` makes them" in check(path)[0]


@pytest.mark.parametrize("onnx_route", [True, False])
def test_the_onnx_route_is_named_only_where_quantize_takes_onnx(monkeypatch, onnx_route):
    monkeypatch.setattr(advice, "_onnx_route", lambda: onnx_route)
    for source in (Source.ULTRALYTICS, Source.LITERT_TORCH, Source.ONNX2TF):
        assert ("edgekit quantize model.onnx" in advice.quantize_remedy(source)) == onnx_route
        fixed = advice.for_source("use integer model inputs: `edgekit quantize` makes them", source)
        assert "`edgekit quantize`" not in fixed and "`edgekit quantize model.onnx`" in fixed or not onnx_route
    assert advice.quantize_remedy(Source.KERAS) is None


def attention_model(constant_key: bool = False) -> bytes:
    """CONV -> two 1x1 CONVs (query, key) -> BATCH_MATMUL of the two (or of the query and a constant)."""
    g = GraphBuilder()
    x = g.tensor([1, 8, 8, 4], "int8", name="images")
    w = g.tensor([4, 1, 1, 4], "int8", data=np.ones((4, 1, 1, 4)), scale=0.01)
    b = g.tensor([4], "int32", data=np.zeros(4), scale=0.0005)
    qry = g.tensor([1, 8, 8, 4], "int8", name="model.10.m.0.attn.qkv")
    g.op("CONV_2D", [x, w, b], [qry], version=3, padding=0, stride_w=1, stride_h=1)
    key = (
        g.tensor([1, 8, 4, 8], "int8", data=np.ones((1, 8, 4, 8)), scale=0.05)
        if constant_key
        else g.tensor([1, 8, 4, 8], "int8", name="model.10.m.0.attn.k")
    )
    if not constant_key:
        g.op("RESHAPE", [qry, g.const([1, 8, 4, 8])], [key], new_shape=[1, 8, 4, 8])
    out = g.tensor([1, 8, 8, 8], "int8", name="model.10.m.0.attn.matmul")
    g.op("BATCH_MATMUL", [qry, key], [out])
    return g.build([x], [out])


def test_yolo11s_attention_block_gets_what_to_use_on_a_coral(tmp_path):
    path = tmp_path / "yolo11n_full_integer_quant.tflite"
    path.write_bytes(with_ultralytics_metadata(attention_model(), ["person"], (8, 8)))
    text, _doc = check(path)
    line = next(a for a in text.splitlines() if "BATCH_MATMUL of two activations" in a)
    assert "C2PSA" in line and "YOLOv8 or YOLOv5u" in line and "#2" in line
    plain = tmp_path / "product_with_a_constant.tflite"
    plain.write_bytes(attention_model(constant_key=True))
    assert "BATCH_MATMUL of two activations" not in check(plain)[0]


def tile_model(names: list[str]) -> bytes:
    """RESHAPE + TILE chains named as Keras 3 names an UpSampling2D's repeat (MODEL_1/LAYER_1/Repeat/Tile)."""
    g = GraphBuilder()
    x = g.tensor([1, 4, 4, 4], "int8", name="images")
    prev = x
    for n in names:
        e = g.tensor([1, 4, 1, 4, 4], "int8", name=f"{n}/Repeat/ExpandDims1")
        g.op("RESHAPE", [prev, g.const([1, 4, 1, 4, 4])], [e], new_shape=[1, 4, 1, 4, 4])
        t = g.tensor([1, 4, 2, 4, 4], "int8", name=f"{n}/Repeat/Tile")
        g.op("TILE", [e, g.const([1, 1, 2, 1, 1])], [t])
        prev = g.tensor([1, 4, 4, 4], "int8", name=f"{n}/Repeat/Reshape")
        g.op("RESHAPE", [t, g.const([1, 4, 4, 4])], [prev], new_shape=[1, 4, 4, 4])
    return g.build([x], [prev])


def test_tile_advice_names_each_upsampling_layer_and_the_resizing_fix(tmp_path):
    path = tmp_path / "unet.tflite"
    path.write_bytes(
        tile_model(["functional_1/up_sampling2d_1", "functional_1/up_sampling2d_1_2", "functional_1/decoder_up_1"])
    )
    line = next(a for a in check(path)[0].splitlines() if a.startswith("Advice: TILE"))
    assert "UpSampling2D 'up_sampling2d', 'up_sampling2d_1', 'decoder_up'" in line
    assert 'Resizing(s*H, s*W, interpolation="nearest")' in line


def fc_model(prefix: str) -> bytes:
    """A FULLY_CONNECTED with keep_num_dims on a 3-D input (nn.Linear / Dense on [1, 8, 16])."""
    g = GraphBuilder()
    x = g.tensor([1, 8, 16], "int8", name="input")
    w = g.tensor([4, 16], "int8", data=np.ones((4, 16)), scale=0.01)
    out = g.tensor([1, 8, 4], "int8", name=f"{prefix}_3;")
    g.op("FULLY_CONNECTED", [x, w, -1], [out], version=5, keepNumDims=True)
    return g.build([x], [out])


def test_a_pytorch_linear_gets_pytorchs_words_not_keras(tmp_path):
    """Was: a litert-torch FULLY_CONNECTED (keep_num_dims) got "Flatten ... before the Dense layer"."""
    torch_path, keras_path = tmp_path / "torch.tflite", tmp_path / "keras.tflite"
    torch_path.write_bytes(fc_model("torch.nn.modules.container.Sequential/torch.nn.modules.linear.Linear"))
    keras_path.write_bytes(fc_model("sequential/dense/MatMul"))
    torch_text, keras_text = check(torch_path)[0], check(keras_path)[0]
    assert "Dense layer" not in torch_text and "torch.flatten(x, 1)" in torch_text and "nn.Linear" in torch_text
    assert "before the Dense layer" in keras_text and "nn.Linear" not in keras_text


def test_a_channels_first_input_transpose_on_the_cpu_is_said_for_litert_torch(tmp_path):
    g = GraphBuilder()
    x = g.tensor([1, 3, 256, 256], "int8", name="serving_default_args_0")
    t = g.tensor([1, 256, 256, 3], "int8", name="torch.nn.modules.conv.Conv2d_0;")
    g.op("TRANSPOSE", [x, g.const([0, 2, 3, 1])], [t])
    path = tmp_path / "litert_torch.tflite"
    path.write_bytes(g.build([x], [t]))
    assert advice.model_source(tflite_model.load(path))[0] == Source.LITERT_TORCH
    line = next(a for a in check(path)[0].splitlines() if "channels-first input" in a)
    assert "#0 [1, 3, 256, 256]" in line and "litert-torch" in line and "channels-last input" in line


@pytest.mark.tf
def test_tensorflow_lowers_upsampling2d_to_tile_and_resizing_nearest_to_a_mapped_resize(tmp_path):
    """The advice rests on this: TF 2.x lowers UpSampling2D (nearest, the default, named or not) to RESHAPE + TILE,
    which check names with its layer; Resizing(interpolation="nearest") to RESIZE_NEAREST_NEIGHBOR and
    UpSampling2D(interpolation="bilinear") to RESIZE_BILINEAR, both on the Edge TPU."""
    import keras
    import tensorflow as tf

    inp = keras.Input((4, 4, 3), batch_size=1)
    x = keras.layers.Conv2D(4, 3, padding="same", name="conv_a")(inp)
    branches = [
        keras.layers.UpSampling2D(2, interpolation="nearest", name="up_nearest")(x),
        keras.layers.UpSampling2D(2, interpolation="bilinear", name="up_bilinear")(x),
        keras.layers.Resizing(8, 8, interpolation="nearest", name="resize_nearest")(x),
    ]
    out = keras.layers.Concatenate(name="joined")(branches)
    converter = tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    rng = np.random.default_rng(0)
    converter.representative_dataset = lambda: ([rng.random((1, 4, 4, 3), np.float32)] for _ in range(8))
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = converter.inference_output_type = tf.int8
    path = tmp_path / "ups.tflite"
    path.write_bytes(converter.convert())
    info = tflite_model.load(path)
    made = {}
    for op in info.main.ops:
        for name in (str(info.main.tensors[i].name) for i in op.outputs):
            layer = next((n for n in ("up_nearest", "up_bilinear", "resize_nearest") if f"/{n}" in name), None)
            if layer:
                made.setdefault(layer, set()).add(op.name)
    assert "TILE" in made["up_nearest"] and made["up_bilinear"] == {"RESIZE_BILINEAR"}
    assert made["resize_nearest"] == {"RESIZE_NEAREST_NEIGHBOR"}
    text, doc = check(path)
    assert "UpSampling2D 'up_nearest'" in text and "up_bilinear'" not in text.split("Advice: TILE")[-1].split("\n")[0]
    placed = {o["name"]: o["target"] for o in doc["ops"] if o["name"].startswith("RESIZE")}
    assert placed == {"RESIZE_BILINEAR": "edgetpu", "RESIZE_NEAREST_NEIGHBOR": "edgetpu"} or "TILE" in text
