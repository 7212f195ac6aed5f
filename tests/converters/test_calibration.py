"""Calibration sources: image folders, arrays, TFRecords, random; sampling, warnings, progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from edgekit.board.preprocess import PreprocessSpec
from edgekit.converters import calibration
from edgekit.errors import InputError

SPEC = PreprocessSpec.with_scaling(8, 8, "0..1")


def _write(folder, name, value, mode="RGB", size=(8, 8)):
    folder.mkdir(parents=True, exist_ok=True)
    color = value if mode == "L" else (value, value, value) if mode == "RGB" else (value, value, value, 255)
    Image.new(mode, size, color).save(folder / name)


def _class_tree(root, counts):
    """One subfolder per class; every pixel of class k's images has value 10*k (to tell them apart)."""
    for k, n in enumerate(counts):
        for i in range(n):
            _write(root / f"class{k}", f"{i}.png", 10 * k)
    return root


def test_class_folders_are_sampled_balanced_and_seeded(tmp_path):
    root = _class_tree(tmp_path / "imgs", [50, 10, 40])
    data = calibration.load(str(root), SPEC, samples=30, holdout=6, seed=1)
    assert data.kind == "images" and data.classes == ["class0", "class1", "class2"]
    assert data.calib.shape == (30, 8, 8, 3) and data.holdout.shape == (6, 8, 8, 3)
    per_class = np.bincount(np.rint(data.calib[:, 0, 0, 0] * 255 / 10).astype(int), minlength=3)
    assert per_class.tolist() == [10, 10, 10]
    again = calibration.load(str(root), SPEC, samples=30, holdout=6, seed=1)
    np.testing.assert_array_equal(again.calib, data.calib)


def test_held_back_samples_are_disjoint_from_calibration():
    groups = [list(range(100)), list(range(100, 130))]
    calib, held = calibration.split_balanced(groups, samples=40, holdout=20, seed=0)
    assert len(calib) == 40 and len(held) == 20 and not set(calib) & set(held)
    assert sum(i >= 100 for i in calib) == 20  # balanced: half from the small class
    other, _ = calibration.split_balanced(groups, samples=40, holdout=20, seed=1)
    assert other != calib


def test_small_pools_keep_a_quarter_back():
    calib, held = calibration.split_balanced([list(range(40))], samples=300, holdout=100, seed=0)
    assert (len(calib), len(held)) == (30, 10)


def test_flat_folder_grayscale_rgba_and_exif_orientation(tmp_path):
    folder = tmp_path / "flat"
    _write(folder, "gray.png", 51, mode="L")
    _write(folder, "rgba.png", 102, mode="RGBA")
    # 8 wide x 4 high, left half black and right half white, EXIF orientation 6 (rotate 90° clockwise):
    # upright it is 4 wide x 8 high with the white half at the bottom.
    im = Image.new("RGB", (8, 4), (0, 0, 0))
    im.paste((255, 255, 255), (4, 0, 8, 4))
    exif = Image.Exif()
    exif[0x0112] = 6
    im.save(folder / "rotated.jpg", exif=exif, quality=100)
    spec = PreprocessSpec.with_scaling(4, 8, "0..1")
    data = calibration.load(str(folder), spec, samples=3, holdout=0)
    assert data.classes is None and data.calib.shape == (3, 8, 4, 3)
    by_mean = sorted(data.calib, key=lambda a: float(a.mean()))
    rotated = [a for a in data.calib if a.max() - a.min() > 0.5][0]
    assert rotated[:4].mean() < 0.1 and rotated[4:].mean() > 0.9
    values = sorted(round(float(a.mean()) * 255) for a in by_mean if a.max() - a.min() < 0.1)
    assert values == [51, 102]
    assert any("fewer than 100" in w for w in data.warnings)


def test_16bit_calibration_images_are_scaled_like_at_inference(tmp_path):
    """A folder of 16-bit PNG/TIFF greys calibrates on the same values as their 8-bit copies (not white)."""
    folder = tmp_path / "imgs16"
    folder.mkdir()
    for i, (value, suffix) in enumerate([(51, ".png"), (102, ".tif"), (204, ".png")]):
        Image.fromarray(np.full((8, 8), value * 257, np.uint16)).save(folder / f"{i}{suffix}")
    data = calibration.load(str(folder), SPEC, samples=3, holdout=0)
    assert sorted(round(float(a.mean()) * 255) for a in data.calib) == [51, 102, 204]


def test_npy_uint8_images_are_preprocessed(tmp_path):
    x = np.full((12, 16, 16, 3), 255, np.uint8)
    np.save(tmp_path / "x.npy", x)
    data = calibration.load(str(tmp_path / "x.npy"), SPEC, samples=8, holdout=4)
    assert data.kind == "npy" and data.calib.shape == (8, 8, 8, 3)  # resized to the spec
    assert np.allclose(data.calib, 1.0)


def test_npz_with_labels_is_balanced_and_float_inputs_pass_through(tmp_path):
    x = np.zeros((30, 8, 8, 3), np.float32)
    y = np.array([0] * 20 + [1] * 10)
    x[y == 1] = 0.5
    np.savez(tmp_path / "d.npz", x=x, y=y)
    data = calibration.load(str(tmp_path / "d.npz"), SPEC, samples=10, holdout=0)
    assert data.classes == ["0", "1"]
    assert np.isclose(data.calib, 0.5).all(axis=(1, 2, 3)).sum() == 5
    assert any("as is" in n for n in data.notes)
    # y gives each sample its class id (for measuring accuracy), not names worth recording
    assert (np.isclose(data.calib[:, 0, 0, 0], 0.5) == (data.calib_labels == 1)).all()
    assert data.class_names is None


@pytest.mark.parametrize(
    ("y", "said"),
    [
        (np.zeros(5, np.int64), r"x has shape \(20, 8, 8, 3\) and y \(5,\): expected one label per image"),
        (np.full(20, np.nan), r"y holds NaN or infinite values"),
        (np.array([0.0, 1.5] * 10), r"y holds fractions such as 1\.5, not class ids"),
        (np.array(["a", "b"] * 10), r"y holds <U1 values, not class ids"),
        (np.int64(3), r"x has shape \(20, 8, 8, 3\) and y \(\): expected one label per image"),
    ],
)
def test_npz_labels_that_are_no_labels_are_refused_as_evaluate_refuses_them(tmp_path, y, said):
    """Was: a y of another length silently dropped (exit 0; evaluate refuses the file with exit 3), a NaN y
    "no samples in it", a fractional y silently unused."""
    np.savez(tmp_path / "d.npz", x=np.zeros((20, 8, 8, 3), np.uint8), y=y)
    with pytest.raises(InputError, match=r"^--calib .*d\.npz: " + said) as exc:
        calibration.load(str(tmp_path / "d.npz"), SPEC, samples=8, holdout=4)
    assert exc.value.exit_code == 3 and exc.value.hint and "\n" not in str(exc.value)


def test_npz_labels_as_whole_floats_or_one_hot_rows_are_class_ids(tmp_path):
    x = np.zeros((20, 8, 8, 3), np.uint8)
    x[10:] = 200
    for y in (np.array([0.0] * 10 + [3.0] * 10), np.eye(4)[[0] * 10 + [3] * 10]):
        np.savez(tmp_path / "d.npz", x=x, y=y)
        data = calibration.load(str(tmp_path / "d.npz"), SPEC, samples=8, holdout=4)
        assert data.classes == ["0", "3"] and data.labelled
        assert ((data.calib_pixels[:, 0, 0, 0] == 200) == (data.calib_labels == 3)).all()


def test_class_folders_give_ids_in_sorted_name_order(tmp_path):
    """Keras's image_dataset_from_directory order: folder names sorted, folder k is class k."""
    for name, value in (("zebra", 250), ("ant", 10), ("cat", 120)):
        (tmp_path / name).mkdir()
        for i in range(4):
            Image.new("RGB", (8, 8), (value,) * 3).save(tmp_path / name / f"{i}.png")
    data = calibration.load(str(tmp_path), SPEC, samples=6, holdout=6)
    assert data.class_names == ["ant", "cat", "zebra"]
    values = {0: 10, 1: 120, 2: 250}
    for pixels, labels in ((data.calib_pixels, data.calib_labels), (data.holdout_pixels, data.holdout_labels)):
        assert [values[k] for k in labels.tolist()] == pixels[:, 0, 0, 0].tolist()


def test_float_array_of_the_wrong_shape_is_refused(tmp_path):
    np.save(tmp_path / "bad.npy", np.zeros((4, 9, 9, 3), np.float32))
    with pytest.raises(InputError, match=r"float array of shape \(9, 9, 3\)"):
        calibration.load(str(tmp_path / "bad.npy"), SPEC)


def test_missing_and_empty_sources(tmp_path):
    with pytest.raises(InputError, match="no such file or folder") as exc:
        calibration.load(str(tmp_path / "nope"), SPEC)
    assert "--calib path/to/images/" in exc.value.hint
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no images found"):
        calibration.load(str(tmp_path / "empty"), SPEC)
    missing = calibration.describe_missing("model.h5")
    assert "--calib path/to/images/" in missing.hint and "--calib random" in missing.hint


def test_a_single_image_or_a_non_array_file_is_refused_with_what_to_pass(tmp_path):
    _write(tmp_path / "imgs", "one.png", 10)
    with pytest.raises(InputError, match="is a single image") as exc:
        calibration.load(str(tmp_path / "imgs" / "one.png"), SPEC)
    assert exc.value.hint == f"pass the folder that holds the images: --calib {tmp_path / 'imgs'}"
    (tmp_path / "notes.npy").write_text("not an array\n")
    with pytest.raises(InputError, match="not a NumPy array of numbers") as exc:
        calibration.load(str(tmp_path / "notes.npy"), SPEC)
    assert "allow_pickle" not in str(exc.value) and "np.save" in exc.value.hint


def test_an_unreadable_image_in_the_folder_is_named_with_what_to_do(tmp_path):
    root = _class_tree(tmp_path / "imgs", [3, 3])
    (root / "class1" / "broken.png").write_text("not a png")
    with pytest.raises(InputError) as exc:
        calibration.load(str(root), SPEC, samples=10, holdout=0)
    assert str(exc.value) == (
        f"--calib {root}: {root / 'class1' / 'broken.png'}: not an image edgekit reads (remove or replace that file)"
    )


def test_random_calibration_warns_loudly():
    data = calibration.load("random", SPEC, samples=5, holdout=2)
    assert data.kind == "random" and data.calib.shape == (5, 8, 8, 3) and len(data.holdout) == 2
    assert data.calib.min() >= 0.0 and data.calib.max() <= 1.0
    assert data.warnings == [calibration.RANDOM_WARNING] and "meaningless" in calibration.RANDOM_WARNING


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal_and_not_when_quiet():
    from edgekit.report import SILENT, ConsoleReporter

    plain = io.StringIO()
    assert list(ConsoleReporter(stream=plain).iterate(range(3), 3, "Reading")) == [0, 1, 2]
    assert plain.getvalue() == ""
    term = _Terminal()
    assert list(ConsoleReporter(stream=term).iterate(range(3), 3, "Reading")) == [0, 1, 2]
    assert "Reading" in term.getvalue()
    quiet = _Terminal()
    list(ConsoleReporter(quiet=True, stream=quiet).iterate(range(3), 3, "Reading"))
    assert quiet.getvalue() == ""
    elsewhere = _Terminal()  # drawn where the caller says (quantize: the real stderr while TensorFlow is hushed)
    list(ConsoleReporter(stream=plain).iterate(range(3), 3, "Calibrating", elsewhere))
    assert "Calibrating" in elsewhere.getvalue() and plain.getvalue() == ""
    assert list(SILENT.iterate(range(3), 3, "Reading")) == [0, 1, 2]


def _png(value):
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (value,) * 3).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tfrecord(tmp_path_factory):
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    path = tmp_path_factory.mktemp("tfr") / "train-00000-of-00001.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(24):
            label = i % 2
            feats = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(200 * label)])),
                "img": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(100)])),
                "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return path


@pytest.mark.tf
def test_tfrecord_shards_written_class_by_class_are_all_sampled(tmp_path, monkeypatch):
    """Was: the first MAX_TFRECORD_SCAN records in file order, i.e. only the first shard's class."""
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    for label in range(3):  # one class per shard, 20 records each
        with tf.io.TFRecordWriter(str(tmp_path / f"train-{label:05d}-of-00003.tfrecord")) as w:
            for _ in range(20):
                feats = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(80 * label)])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                }
                w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    monkeypatch.setattr(calibration, "MAX_TFRECORD_SCAN", 15)
    data = calibration.load(str(tmp_path), SPEC, samples=9, holdout=3)
    assert data.classes == ["0", "1", "2"]
    assert sorted(np.bincount(data.calib_labels).tolist()) == [3, 3, 3]
    assert any("an even share from the start of each of 3 file(s)" in n for n in data.notes)


def _example(tf, png: bytes, label: int) -> bytes:
    feats = {
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
        "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()


@pytest.mark.tf
def test_tfrecord_shares_go_to_the_files_that_have_more_and_every_file_is_read(tmp_path):
    """Files of 2, 40 and 40 records, 30 to read: 2 + 14 + 14 (the short file's share goes to the others)."""
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    files = []
    for k, n in enumerate([2, 40, 40]):
        files.append(str(tmp_path / f"s{k}.tfrecord"))
        with tf.io.TFRecordWriter(files[-1]) as w:
            for i in range(n):
                w.write(_example(tf, b"%d-%d" % (k, i), k))
    read = [
        tf.train.Example.FromString(r.numpy()).features.feature["image/encoded"].bytes_list.value[0]
        for r in calibration._records_in_shares(tf, files, 30)
    ]
    assert len(read) == len(set(read)) == 30
    assert [sum(r.startswith(b"%d-" % k) for r in read) for k in range(3)] == [2, 14, 14]
    assert sorted(int(r.split(b"-")[1]) for r in read if r.startswith(b"1-")) == list(range(14))  # from the start
    # fewer records to read than files: one from each of the first ones
    assert len(list(calibration._records_in_shares(tf, files, 2))) == 2


# Run in a child so that its open-file limit is its own: 300 class-sorted one-record shards (ImageNet has
# 1,024 training shards) must calibrate with fewer open files allowed than there are shards. Was: the
# interleave opened every shard at once ("Too many open files", reported as a damaged file), and printed
# TensorFlow's 2-line UserWarning about `deterministic` on stderr for every TFRecord calibration.
MANY_SHARDS = r"""
import json, resource, sys
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (128, hard))
import numpy as np
from edgekit.converters import calibration
from edgekit.board.preprocess import PreprocessSpec
data = calibration.load(sys.argv[1], PreprocessSpec.with_scaling(8, 8, "0..1"), samples=60, holdout=30)
print("RESULT " + json.dumps({"classes": data.classes, "per_class": np.bincount(data.calib_labels).tolist(),
                              "pixels": sorted(set(np.round(data.calib[:, 0, 0, 0] * 255).astype(int).tolist()))}))
"""


@pytest.mark.tf
def test_hundreds_of_class_sorted_shards_calibrate_under_a_low_open_file_limit_without_warnings(tmp_path):
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    pngs = [_png(80 * k) for k in range(3)]
    for s in range(300):  # shards 0-99 hold class 0, 100-199 class 1, 200-299 class 2
        with tf.io.TFRecordWriter(str(tmp_path / f"train-{s:05d}-of-00300.tfrecord")) as w:
            w.write(_example(tf, pngs[s // 100], s // 100))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", MANY_SHARDS, str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stderr[-3000:]
    doc = json.loads(line[len("RESULT ") :])
    assert doc["classes"] == ["0", "1", "2"] and doc["per_class"] == [20, 20, 20]
    assert doc["pixels"] == [0, 80, 160]
    assert "UserWarning" not in proc.stderr and "deterministic" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.tf
def test_tfrecord_calibration_warns_nothing(tfrecord):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibration.load(str(tfrecord), SPEC, samples=4, holdout=2)
    assert [str(w.message) for w in caught] == []


@pytest.mark.tf
def test_tfrecord_default_key_and_labels(tfrecord):
    data = calibration.load(str(tfrecord), SPEC, samples=10, holdout=4)
    assert data.kind == "tfrecord" and data.classes == ["0", "1"]
    assert data.calib.shape == (10, 8, 8, 3)
    assert sorted(set(np.round(data.calib[:, 0, 0, 0] * 255).astype(int).tolist())) == [0, 200]
    assert (np.round(data.calib[:, 0, 0, 0] * 255) == 200 * data.calib_labels).all()  # image/class/label
    assert (np.round(data.holdout[:, 0, 0, 0] * 255) == 200 * data.holdout_labels).all()


@pytest.mark.tf
def test_damaged_or_empty_tfrecords_are_bad_input(tfrecord, tmp_path):
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(tfrecord.read_bytes()[:300])
    with pytest.raises(InputError, match=r"cannot read TFRecord: truncated record") as exc:
        calibration.load(str(cut), SPEC)
    assert "{{" not in str(exc.value) and "damaged or truncated" in exc.value.hint
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(InputError, match="no samples in it"):
        calibration.load(str(tmp_path / "empty.tfrecord"), SPEC)


@pytest.mark.tf
def test_tfrecord_custom_key_and_missing_key(tfrecord):
    data = calibration.load(str(tfrecord), SPEC, samples=4, holdout=0, tfrecord_key="img")
    assert np.allclose(data.calib * 255, 100, atol=0.5)
    with pytest.raises(InputError, match="no encoded image under 'jpeg'") as exc:
        calibration.load(str(tfrecord), SPEC, tfrecord_key="jpeg")
    assert "image/encoded" in exc.value.message and "--tfrecord-key" in exc.value.hint


def _huge_header_npy(path, shape=(1_200_000, 1024, 1024, 3)):
    """A real .npy header claiming ~3.4 TiB of uint8, followed by a few bytes: nothing may allocate that."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
        f.write(bytes(64))


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_an_array_header_bigger_than_the_file_is_refused_before_allocating(tmp_path, kind):
    """Was: exit 70 MemoryError (numpy allocated what the header said)."""
    path = tmp_path / "big.npy"
    _huge_header_npy(path)
    if kind == "npz":
        import zipfile

        with zipfile.ZipFile(tmp_path / "big.npz", "w") as z:
            z.write(path, "x.npy")
        path = tmp_path / "big.npz"
    with pytest.raises(
        InputError,
        match=r"header says \(1200000, 1024, 1024, 3\) uint8 \(3,774,873,600,000 bytes\)"
        r" but the file holds 64 ",
    ) as exc:
        calibration.load(str(path), SPEC)
    assert "np.save" in exc.value.hint


@pytest.mark.parametrize("channels", [2, 5])
def test_images_with_an_odd_channel_count_are_named(tmp_path, channels):
    """Was: exit 70 TypeError from Pillow."""
    np.save(tmp_path / "x.npy", np.zeros((4, 8, 8, channels), np.uint8))
    with pytest.raises(InputError, match=f"images with {channels} channels") as exc:
        calibration.load(str(tmp_path / "x.npy"), SPEC)
    assert "3 (RGB)" in exc.value.hint


def test_nan_in_a_float_array_is_bad_input_not_a_conversion_failure(tmp_path):
    x = np.zeros((6, 8, 8, 3), np.float32)
    x[2, 1, 1, 0] = np.nan
    x[3, 1, 1, 0] = np.inf
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(InputError, match=r"NaN or infinite values \(2 of 1152\)") as exc:
        calibration.load(str(tmp_path / "x.npy"), SPEC)
    assert exc.value.exit_code == 3 and "nan_to_num" in exc.value.hint


@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_integer_and_bool_arrays_say_what_to_store(tmp_path, dtype):
    np.save(tmp_path / "x.npy", np.zeros((4, 8, 8, 3), dtype))
    with pytest.raises(InputError, match="neither uint8 images nor float inputs") as exc:
        calibration.load(str(tmp_path / "x.npy"), SPEC)
    assert "astype(np.uint8)" in exc.value.hint


@pytest.mark.parametrize(
    "shape_of",
    ["ids", "column", "column_uint8", "onehot_uint8", "onehot_int64", "onehot_float", "smoothed", "column_float"],
)
def test_every_label_shape_keras_produces_gives_the_same_class_ids(tmp_path, shape_of):
    """Was: (N, 1) ids, what keras.datasets.cifar10.load_data() returns, read as one-hot rows of one class:
    class 0 for every sample (evaluate printed 11% for a 79% model, quantize called it near chance)."""
    ids = np.array([0, 3, 1, 2, 3, 0, 2, 1] * 3)
    y = {
        "ids": ids,
        "column": ids[:, None],
        "column_uint8": ids[:, None].astype(np.uint8),
        "onehot_uint8": np.eye(4, dtype=np.uint8)[ids],
        "onehot_int64": np.eye(4, dtype=np.int64)[ids],
        "onehot_float": np.eye(4, dtype=np.float32)[ids],
        "column_float": ids[:, None].astype(np.float32),
        "smoothed": (np.eye(4) * 0.9 + 0.1 / 4)[ids],
    }[shape_of]
    x = (ids[:, None, None, None] * 60 + np.zeros((1, 8, 8, 3))).astype(np.uint8)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    data = calibration.load(str(tmp_path / "d.npz"), SPEC, samples=16, holdout=8)
    assert data.classes == ["0", "1", "2", "3"]
    for pixels, labels in ((data.calib_pixels, data.calib_labels), (data.holdout_pixels, data.holdout_labels)):
        assert (pixels[:, 0, 0, 0] == labels * 60).all()
    from edgekit.data.labelled import read_labelled_arrays

    assert read_labelled_arrays(tmp_path / "d.npz")[1].tolist() == ids.tolist()  # evaluate reads it alike


@pytest.mark.parametrize(
    ("y", "said"),
    [
        (
            np.array([[1, 1, 0], [0, 1, 0]] * 4),
            r"has shape \(8, 3\) but its rows are not one-hot: row 0 has 2 ones "
            r"\(multi-label\?\)",
        ),
        (np.array([[0, 0, 0], [0, 1, 0]] * 4), r"row 0 has 0 ones"),
        (
            np.array([[2.0, -1.0, 0.5]] * 8),
            r"row 0 is no one-hot or probability row \(sums to 1\.5; scores or logits\?\)",
        ),
        (np.array([[0.5, 0.5, 0.0]] * 8), r"row 0 has a tie for its largest value"),
        (np.array([[3], [-1]] * 4), r"holds negative class ids such as -1"),
    ],
)
def test_ambiguous_label_rows_are_refused_naming_the_shape(tmp_path, y, said):
    np.savez(tmp_path / "d.npz", x=np.zeros((8, 8, 8, 3), np.uint8), y=y)
    for read in (
        lambda: calibration.load(str(tmp_path / "d.npz"), SPEC, samples=4, holdout=2),
        lambda: __import__("edgekit.data.labelled").data.labelled.read_labelled_arrays(tmp_path / "d.npz"),
    ):
        with pytest.raises(InputError, match=said) as exc:
            read()
        assert exc.value.exit_code == 3 and "(N, 1)" in exc.value.hint and "\n" not in str(exc.value)


@pytest.mark.tf
@pytest.mark.parametrize("kind", ["int64", "float"])
def test_tfrecord_one_hot_labels_are_class_ids_not_their_first_value(tmp_path, kind):
    """Was: a one-hot label list read as its first value (class 0 for all but class 0's own samples)."""
    from edgekit.converters.tf_quiet import import_tensorflow

    tf = import_tensorflow()
    with tf.io.TFRecordWriter(str(tmp_path / "d.tfrecord")) as w:
        for i in range(18):
            label = i % 3
            row = np.eye(3)[label]
            feature = (
                tf.train.Feature(int64_list=tf.train.Int64List(value=row.astype(int).tolist()))
                if kind == "int64"
                else tf.train.Feature(float_list=tf.train.FloatList(value=row.tolist()))
            )
            feats = {
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[_png(100 * label)])),
                "image/class/label": feature,
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    data = calibration.load(str(tmp_path / "d.tfrecord"), SPEC, samples=9, holdout=3)
    assert data.classes == ["0", "1", "2"]
    assert (np.round(data.calib_pixels[:, 0, 0, 0]) == 100 * data.calib_labels).all()


def test_using_the_spec_the_samples_already_follow_does_not_normalize_them_again():
    """quantize calls use() with the settled spec; when it is the spec the samples were read with (an exporter's,
    a recorded one) the arrays stay as they are, and any other scaling or channel order is applied afresh."""
    data = calibration.load("random", SPEC, samples=12, holdout=4, seed=0)
    calib, holdout = data.calib, data.holdout
    data.use(PreprocessSpec.with_scaling(8, 8, "0..1"))  # equal, not the same object
    assert data.calib is calib and data.holdout is holdout
    for other in (PreprocessSpec.with_scaling(8, 8, "-1..1"), PreprocessSpec(8, 8, "BGR", "lanczos", (0.0,), (255.0,))):
        data.use(other)
        expected = calibration.normalize_rgb(data.calib_pixels, other)
        assert data.calib is not calib and np.array_equal(data.calib, expected)
        assert np.array_equal(data.holdout, calibration.normalize_rgb(data.holdout_pixels, other))
        calib = data.calib
    data.use(SPEC)  # back to the first spec: normalized again, not left as the last one
    assert np.array_equal(data.calib, calibration.normalize_rgb(data.calib_pixels, SPEC))


@pytest.mark.parametrize("letterbox", [False, True])
def test_a_letterboxed_detector_is_calibrated_on_letterboxed_images(tmp_path, letterbox):
    """16x8 images for an 8x8 input: scaled to 8x4 with grey bars of 2 rows above and below, as evaluate and detect
    feed a letterboxed detector (Ultralytics' LetterBox); stretched otherwise. uint8 arrays likewise."""
    for i in range(6):
        _write(tmp_path / "imgs", f"{i}.png", 200, size=(16, 8))
    np.save(tmp_path / "x.npy", np.full((6, 8, 16, 3), 200, np.uint8))
    for source in (tmp_path / "imgs", tmp_path / "x.npy"):
        data = calibration.load(str(source), SPEC, samples=4, holdout=2, letterbox=letterbox)
        for px in (data.calib_pixels, data.holdout_pixels):
            assert px.shape[1:] == (8, 8, 3) and (px[:, 2:6] == 200).all()
            assert (px[:, [0, 1, 6, 7]] == (114 if letterbox else 200)).all()
