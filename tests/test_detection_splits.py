"""Ultralytics datasets as Ultralytics reads them (issue 35, item 3): ``--data data.yaml`` (its val: split and
names), ``--data images/val`` (labels found in labels/val), and a root holding several splits scored on its val
split only, said, never pooled (evaluate scored train and val pooled: 700 images instead of val's 100)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edgekit.detection.data import is_detection_data, make_shapes, read_detection_set
from edgekit.errors import InputError

NAMES = ["rectangle", "ellipse", "triangle"]


def ultralytics_root(root: Path, splits=(("train", 9, 1), ("val", 4, 2)), roboflow: bool = False) -> Path:
    """``root/images/<split>`` + ``root/labels/<split>`` (or Roboflow's ``root/<split>/images``), from edgekit's
    shapes writer."""
    for split, n, seed in splits:
        tmp = root / "_tmp" / split
        make_shapes(tmp, n_images=n, seed=seed, size=(64, 48))
        for kind in ("images", "labels"):
            dest = root / split / kind if roboflow else root / kind / split
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(tmp / kind), str(dest))
    shutil.rmtree(root / "_tmp")
    return root


@pytest.mark.parametrize("roboflow", [False, True])
def test_a_root_with_several_splits_scores_val_only_and_says_so(tmp_path, roboflow):
    root = ultralytics_root(tmp_path / "ds", roboflow=roboflow)
    assert is_detection_data(root)
    data = read_detection_set(root)
    assert len(data) == 4  # val's 4 images, not train's 9 pooled with them
    assert all(("val" + "/") in p.replace("\\", "/") for p in data.paths.values())
    assert len(data.notes) == 1 and "scoring val only" in data.notes[0] and "train" in data.notes[0]


def test_a_root_whose_splits_have_no_val_is_refused(tmp_path):
    root = ultralytics_root(tmp_path / "ds", splits=(("train", 3, 1), ("test", 2, 2)))
    with pytest.raises(InputError, match="none is val") as exc:
        read_detection_set(root)
    assert "/images/test" in exc.value.hint.replace("\\", "/")


@pytest.mark.parametrize(
    "names_block",
    [
        "names:\n  0: rectangle\n  1: ellipse\n  2: triangle\n",
        "names: [rectangle, ellipse, 'triangle']\n",
        "names:\n  - rectangle\n  - ellipse\n  - triangle\n",
    ],
)
def test_data_yaml_gives_its_val_split_and_names(tmp_path, names_block):
    root = ultralytics_root(tmp_path / "ds")
    yaml = tmp_path / "elsewhere" / "shapes.yaml"
    yaml.parent.mkdir()
    yaml.write_text(f"# made by a test\npath: {root}\ntrain: images/train\nval: images/val  # 4 images\n{names_block}")
    assert is_detection_data(yaml)
    data = read_detection_set(yaml)
    assert len(data) == 4 and not data.notes
    assert [c["name"] for c in data.categories] == NAMES
    labelled = sum(
        Path(p.replace("images", "labels").rsplit(".", 1)[0] + ".txt").is_file() for p in data.paths.values()
    )
    assert labelled == 4 and len(data.coco["annotations"]) > 0


def test_data_yaml_without_path_reads_beside_itself_and_refuses_a_missing_split(tmp_path):
    root = ultralytics_root(tmp_path / "ds")
    (root / "data.yaml").write_text("train: images/train\nval: images/val\nnames: [rectangle, ellipse, triangle]\n")
    assert len(read_detection_set(root / "data.yaml")) == 4
    (root / "bad.yaml").write_text("train: images/train\nval: images/nowhere\n")
    with pytest.raises(InputError, match="not an image folder with a labels folder"):
        read_detection_set(root / "bad.yaml")
    (root / "nosplit.yaml").write_text("train: images/train\n")
    with pytest.raises(InputError, match="no val: split"):
        read_detection_set(root / "nosplit.yaml")


def test_an_image_folder_finds_its_labels_as_ultralytics_does(tmp_path):
    root = ultralytics_root(tmp_path / "ds")
    (root / "classes.txt").write_text("\n".join(NAMES) + "\n")
    assert is_detection_data(root / "images" / "val")
    data = read_detection_set(root / "images" / "val")
    assert len(data) == 4 and [c["name"] for c in data.categories] == NAMES
    whole = read_detection_set(root / "images" / "train")
    assert len(whole) == 9 and len(whole.coco["annotations"]) > 0


def test_evaluate_says_which_split_it_scored(tmp_path):
    """Through edgekit evaluate: the note is among the result's warnings (a detector from the committed exports)."""
    import edgekit

    model = Path(__file__).resolve().parent / "fixtures" / "exports" / "yolov8t_256_full_integer_quant.tflite"
    root = ultralytics_root(tmp_path / "ds")
    result = edgekit.evaluate_detector(model, root)
    assert result.images == 4
    assert [w for w in result.warnings if "scoring val only" in w]
