"""Detection data from strangers (issue 31): COCO and YOLO readers refuse what cannot be scored with one line naming
the entry or file:line, never allocate by a number a file gives, never read outside the data's folders, and say
what they changed. Two seeded fuzzers mutate a small valid set of each kind."""

from __future__ import annotations

import copy
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.detection.data import check_classes, make_shapes, read_detection_set, yaml_names
from edgekit.errors import Caution, EdgekitError, InputError
from tests.conftest import REPO


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("shapes") / "set"
    make_shapes(root, n_images=5, size=(48, 40), seed=2, empty_every=0)
    return root


@pytest.fixture(scope="module")
def detector(tmp_path_factory) -> Path:
    from edgekit.board.decode import anchor_count
    from tests.detection_models import slice_model

    model = tmp_path_factory.mktemp("model") / "yolo3.tflite"
    model.write_bytes(slice_model((64, 64), [{"shape": [1, 4 + 3, anchor_count((64, 64))]}]))
    return model


def coco_copy(shapes: Path, tmp_path: Path, change=None) -> Path:
    """The shapes' COCO file, changed by ``change(doc)``, written beside a link to its images."""
    doc = json.loads((shapes / "annotations.json").read_text())
    if change is not None:
        change(doc)
    (tmp_path / "images").symlink_to(shapes / "images")
    ann = tmp_path / "instances.json"
    ann.write_text(json.dumps(doc))
    return ann


def yolo_copy(shapes: Path, tmp_path: Path) -> Path:
    root = tmp_path / "yolo"
    for sub in ("images", "labels"):
        (root / sub).mkdir(parents=True)
        for f in (shapes / sub).iterdir():
            (root / sub / f.name).write_bytes(f.read_bytes())
    return root


def refused(*args, match: str) -> str:
    with pytest.raises(InputError) as info:
        read_detection_set(*args)
    assert info.value.exit_code == 3
    line = str(info.value)
    assert match in line and "\n" not in line, line
    return line


# ------------------------------------------------------------------------------------ security 2: numbers in files
def _limited_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def evaluate_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")}, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "edgekit", "evaluate", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limited_memory,
    )


def test_a_huge_class_id_is_exit_3_naming_file_and_line_under_a_memory_limit(shapes, detector, tmp_path):
    """Was: as many class names allocated as the label's number said (memory exhausted, then exit 70)."""
    pytest.importorskip("pycocotools")
    model = detector
    root = yolo_copy(shapes, tmp_path)
    label = root / "labels" / "shapes_0001.txt"
    label.write_text(label.read_text() + "999999999999 0.5 0.5 0.1 0.1\n")
    line_no = len(label.read_text().splitlines())
    proc = evaluate_cli("-m", str(model), "--data", str(root), timeout=30)
    assert proc.returncode == 3, proc.stderr
    assert f"shapes_0001.txt:{line_no}: class 999999999999 is beyond the model's 3 classes" in proc.stderr
    assert "Traceback" not in proc.stderr
    (root / "classes.txt").write_text("a\nb\nc\n")  # beyond the names too: said before the model opens
    proc = evaluate_cli("-m", str(model), "--data", str(root), timeout=30)
    assert proc.returncode == 3 and "is beyond the 3 names in classes.txt" in proc.stderr, proc.stderr
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text("path: .\nnames: {999999999999: x}\n")
    proc = evaluate_cli("-m", str(model), "--data", str(root), timeout=30)
    assert proc.returncode == 3 and "index 999999999999: indices must be 0 to 0" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda d: d["images"][0].update(file_name="/etc/hostname"), 'images[0] (id 1): file_name "/etc/hostname" is'),
        (lambda d: d["annotations"][2].update(iscrowd="no"), 'annotations[2] (id 3): iscrowd "no"'),
        (lambda d: d.update(annotations=[]), "holds no object to score"),
    ],
)
def test_evaluate_refuses_bad_coco_with_one_line_and_exit_3(shapes, detector, tmp_path, change, says):
    pytest.importorskip("pycocotools")
    proc = evaluate_cli("-m", str(detector), "--data", str(coco_copy(shapes, tmp_path, change)))
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 3 and len(errors) == 1 and says in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_duplicate_names_are_a_warning_in_the_json_and_clipped_boxes_a_note(shapes, detector, tmp_path):
    pytest.importorskip("pycocotools")

    def change(doc):
        doc["categories"][2]["name"] = "rectangle"
        doc["annotations"][0]["bbox"] = [-20, -20, 500, 500]

    proc = evaluate_cli("-m", str(detector), "--data", str(coco_copy(shapes, tmp_path, change)), "--json")
    assert proc.returncode == 0, proc.stderr
    assert any("used by more than one category" in w for w in json.loads(proc.stdout)["warnings"])
    assert "note: 1 box(es) reaching more than a pixel outside their image are clipped" in proc.stderr


def test_a_class_beyond_the_model_is_refused_before_any_image_runs(shapes, tmp_path):
    root = yolo_copy(shapes, tmp_path)
    (root / "labels" / "shapes_0002.txt").write_text("7 0.5 0.5 0.2 0.2\n")
    ds = read_detection_set(root)  # no names: the categories are the ids used, not a range
    assert [c["id"] for c in ds.categories] == sorted({a["category_id"] for a in ds.coco["annotations"]})
    with pytest.raises(InputError, match=r"shapes_0002.txt:1: class 7 is beyond the model's 3 classes"):
        check_classes(ds, 3)
    check_classes(ds, 8)


def test_quantize_and_build_check_eval_detection_data_first(shapes, tmp_path):
    """--eval detection data is read whole before the model is even loaded (an empty .keras here), and the
    mAP50 gate refuses a class beyond the model's before any image runs."""
    from types import SimpleNamespace

    from edgekit.converters.detector_verify import map50_gate

    root = yolo_copy(shapes, tmp_path)
    (root / "labels" / "shapes_0004.txt").write_text("1 0.5 0.5 0.2 0.2\n5 0.5 0.5 0.2 0.2\n")
    with pytest.raises(InputError, match="shapes_0004.txt:2: class 5 is beyond the model's 3 classes"):
        map50_gate(None, b"", SimpleNamespace(num_classes=3), None, str(root), 1.0)
    (root / "classes.txt").write_text("a\nb\nc\n")
    (tmp_path / "m.keras").write_bytes(b"")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_")}, "PYTHONPATH": str(REPO)}
    for command in (["quantize"], ["build", "-o", str(tmp_path / "out")]):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "edgekit",
                *command,
                str(tmp_path / "m.keras"),
                "--calib",
                str(root),
                "--eval",
                str(root),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, proc.stderr
        assert "--eval: " in proc.stderr and "shapes_0004.txt:2: class 5 is beyond the 3 names" in proc.stderr


@pytest.mark.parametrize(
    "text, names",
    [
        ("names: [a, 'b c', d]\n", ["a", "b c", "d"]),
        ("names:\n  - a\n  - b\nnc: 2\n", ["a", "b"]),
        ("names:\n  0: a\n  1: b  \n\nval: x\n", ["a", "b"]),
        ("names: {0: a, 1: 'b'}\n", ["a", "b"]),
        ("train: x\n", None),
    ],
)
def test_data_yaml_names_in_ultralytics_forms(text, names):
    assert yaml_names(text, "data.yaml") == names


@pytest.mark.parametrize(
    "text",
    [
        "names: {0: a, 5: b}\n",
        "names:\n  -1: a\n",
        "names:\n  0: a\n  0: b\n",
        "names: {x: a}\n",
        "names: {" + "9" * 5000 + ": a}\n",
    ],
)
def test_data_yaml_names_with_a_gap_or_no_index_are_refused(text):
    with pytest.raises(InputError, match="data.yaml: names"):
        yaml_names(text, "data.yaml")


# ------------------------------------------------------------------------------------ security 4: escaping names
@pytest.mark.parametrize(
    "name, says",
    [
        ("/etc/hostname", "is absolute or climbs out"),
        ("../secret.png", "is absolute or climbs out"),
        ("sub/../../secret.png", "is absolute or climbs out"),
        ("C:\\secret.png", "is absolute or climbs out"),
        ("a\x00.png", "expected a file name"),
        ("", "expected a file name"),
        (None, "expected a file name"),
    ],
)
def test_a_coco_file_name_out_of_the_image_folder_is_refused(shapes, tmp_path, name, says):
    """Was: absolute names and .. read and scored."""

    def change(doc):
        doc["images"][1]["file_name"] = name

    ann = coco_copy(shapes, tmp_path, change)
    line = refused(ann, match=says)
    assert "images[1] (id 2)" in line


def test_links_out_of_the_data_folders_are_refused(shapes, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.png").write_bytes((shapes / "images" / "shapes_0000.png").read_bytes())
    folder = tmp_path / "coco"
    folder.mkdir()
    (folder / "link.png").symlink_to(outside / "x.png")
    doc = json.loads((shapes / "annotations.json").read_text())
    doc["images"][0]["file_name"] = "link.png"
    for im in doc["images"][1:]:
        (folder / im["file_name"]).write_bytes((shapes / "images" / im["file_name"]).read_bytes())
    (folder / "a.json").write_text(json.dumps(doc))
    refused(folder / "a.json", match="link.png leads outside")
    root = yolo_copy(shapes, tmp_path)
    (root / "images" / "z.png").symlink_to(outside / "x.png")
    refused(root, match="z.png leads outside")
    (root / "images" / "z.png").unlink()
    (outside / "l.txt").write_text("0 0.5 0.5 0.1 0.1\n")
    (root / "labels" / "shapes_0000.txt").unlink()
    (root / "labels" / "shapes_0000.txt").symlink_to(outside / "l.txt")
    refused(root, match="shapes_0000.txt leads outside")


# ------------------------------------------------------------------------------------ malformed entries
def _set(path, value):
    def change(doc):
        *keys, last = path
        target = doc
        for k in keys:
            target = target[k]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value

    return change


@pytest.mark.parametrize(
    "change, says",
    [
        (_set(("images", 2, "id"), "3"), 'images[2]: id is "3": expected an integer'),
        (_set(("images", 2, "id"), None), "images[2]: id is null"),
        (_set(("annotations", 0, "id"), None), "annotations[0]: id is null"),
        (_set(("annotations", 0, "image_id"), 1.0), "annotations[0] (id 1): image_id is 1.0"),
        (_set(("categories", 1, "name"), KeyError), "categories[1] (id 1): name is missing"),
        (_set(("categories", 1, "name"), 7), "categories[1] (id 1): name is 7"),
        (_set(("categories", 1, "id"), 0), "categories[1]: category id 0 appears twice"),
        (_set(("annotations", 1, "area"), "big"), 'annotations[1] (id 2): iscrowd 0, area "big"'),
        (_set(("annotations", 1, "iscrowd"), "0"), 'annotations[1] (id 2): iscrowd "0"'),
        (_set(("annotations", 1, "bbox"), [1, 2, 3]), "annotations[1] (id 2): bbox is a list"),
        (_set(("annotations", 1, "bbox"), [1, 2, "3", 4]), "bbox is a list: expected [x, y, width, height]"),
        (_set(("annotations", 1, "id"), 1), "annotations[1] (id 1): annotation id 1 appears twice"),
        (_set(("annotations", 1, "category_id"), 9), "names an unknown category (9)"),
        (_set(("images", 0, "width"), "48"), 'images[0] (id 1): width "48"'),
        (_set(("images", 0), []), "images[0] is a list, not an object"),
        (_set(("annotations",), {}), "annotations is an object, not a list"),
    ],
)
def test_a_malformed_coco_entry_is_one_line_naming_it(shapes, tmp_path, change, says):
    """Was: mixed or null ids, a category without a name, a string area or iscrowd... exit 70 in pycocotools."""
    refused(coco_copy(shapes, tmp_path, change), match=says)


def test_an_empty_coco_set_is_refused_saying_what_to_do(shapes, tmp_path):
    """Was: exit 0 with every mAP null."""
    refused(coco_copy(shapes, tmp_path, _set(("annotations",), [])), match="holds no object to score")
    (tmp_path / "2").mkdir()
    refused(coco_copy(shapes, tmp_path / "2", lambda d: d.update(images=[], annotations=[])), match="no images")
    (tmp_path / "3").mkdir()
    refused(
        coco_copy(shapes, tmp_path / "3", lambda d: [a.update(iscrowd=1) for a in d["annotations"]]),
        match="no object to score",
    )


def test_boxes_outside_their_image_are_clipped_or_skipped_and_counted(shapes, tmp_path):
    def change(doc):
        doc["annotations"][0]["bbox"] = [10, 10, -5, 8]  # negative width: skipped
        doc["annotations"][1]["bbox"] = [-1e30, 5, 2e30, 1e300]  # huge: clipped to the 48x40 image
        doc["annotations"][2]["bbox"] = [100, 100, 5, 5]  # wholly outside: skipped
        doc["annotations"][3].pop("area")

    ds = read_detection_set(coco_copy(shapes, tmp_path, change))
    anns = {a["id"]: a for a in ds.coco["annotations"]}
    assert 1 not in anns and 3 not in anns and anns[2]["bbox"] == [0.0, 5.0, 48.0, 35.0]
    assert anns[4]["area"] == anns[4]["bbox"][2] * anns[4]["bbox"][3]
    assert any(n.startswith("2 box(es) with no area") and n.endswith("e.g. annotations[0] (id 1)") for n in ds.notes)
    assert any(n.startswith("1 box(es) reaching more than a pixel outside") for n in ds.notes)
    root = yolo_copy(shapes, tmp_path)
    (root / "labels" / "shapes_0003.txt").write_text("0 0.5 0.5 -0.1 0.2\n1 0.5 0.5 3 1\n2 0.5 0.5 0.1 0.1\n")
    ds = read_detection_set(root)
    assert any(n.startswith("1 box(es) with no area") and "shapes_0003.txt:1" in n for n in ds.notes)
    assert any(n.startswith("1 box(es) reaching") and "shapes_0003.txt:2" in n for n in ds.notes)
    assert next(a["bbox"] for a in ds.coco["annotations"] if a["image_id"] == 4) == [0.0, 0.0, 48.0, 40.0]


def test_two_categories_of_one_name_are_said_and_matched_by_order(shapes, tmp_path):
    from edgekit.devices.evaluate_detector import category_map

    ds = read_detection_set(coco_copy(shapes, tmp_path, _set(("categories", 2, "name"), "rectangle")))
    assert any(isinstance(n, Caution) and "used by more than one category" in n and "ids 0, 2" in n for n in ds.notes)
    notes: list = []
    assert category_map(ds, {0: "rectangle", 1: "ellipse", 2: "triangle"}, 3, notes) == {0: 0, 1: 1, 2: 2}


def test_a_label_file_that_is_a_folder_and_bad_lines_name_file_and_line(shapes, tmp_path):
    root = yolo_copy(shapes, tmp_path)
    (root / "labels" / "shapes_0001.txt").unlink()
    (root / "labels" / "shapes_0001.txt").mkdir()
    refused(root, match="shapes_0001.txt is a folder")
    (root / "labels" / "shapes_0001.txt").rmdir()
    for text in (
        "0 0.5 0.5 0.1\n",
        "x 0.5 0.5 0.1 0.1\n",
        "0 nan 0.5 0.1 0.1\n",
        "-1 0.5 0.5 0.1 0.1\n",
        "9" * 5000 + " 0.5 0.5 0.1 0.1\n",
        "99999999999999999999 0.5 0.5 0.1 0.1\n",
    ):
        (root / "labels" / "shapes_0001.txt").write_text("1 0.5 0.5 0.2 0.2\n" + text)
        refused(root, match="shapes_0001.txt:2: not 'class cx cy w h'")
    for f in (root / "labels").iterdir():
        f.write_text("")
    refused(root, match="holds no object to score")


def test_hidden_files_in_images_are_skipped_as_classify_does(shapes, tmp_path):
    """Was: one macOS ``._a.png`` companion (not an image) failed the whole run."""
    from edgekit.data.labelled import list_images

    root = yolo_copy(shapes, tmp_path)
    (root / "images" / "._shapes_0000.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")
    (root / "images" / ".thumbs").mkdir()
    (root / "images" / ".thumbs" / "t.png").write_bytes(b"not a png")
    ds = read_detection_set(root)
    assert len(ds) == 5 and not any("/." in p for p in ds.paths.values())
    groups, _ = list_images(root / "images")  # classify's calibration reader too
    assert len(groups[0]) == 5


# ------------------------------------------------------------------------------------ fuzzers
ODD = [
    None,
    True,
    -1,
    0,
    1,
    2**63,
    1e300,
    float("nan"),
    float("inf"),
    -0.0,
    "",
    "0",
    "../x.png",
    "/etc/passwd",
    "a\x00b",
    [],
    [1, 2, 3, 4],
    {},
    {"id": 1},
    "\u202e",
    10**30,
    3.5,
]


def _paths(doc, prefix=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


def _mutate(doc, rng: random.Random):
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_paths(doc)))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        kind = rng.random()
        if kind < 0.6:
            parent[path[-1]] = rng.choice(ODD)
        elif kind < 0.75 and isinstance(parent, dict):
            del parent[path[-1]]
        elif kind < 0.9 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))  # a duplicate entry (ids twice)
        else:
            value = parent[path[-1]]
            parent[path[-1]] = value * rng.choice([-1, 1e6, 0]) if isinstance(value, (int, float)) else value
    return doc


def _scores(ds) -> None:
    """What the reader returns, pycocotools scores (its own boxes as detections, and none)."""
    from edgekit.devices.evaluate_detector import run_cocoeval

    dets = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "score": 0.9, "bbox": a["bbox"]}
        for a in ds.coco["annotations"]
    ]
    ev = run_cocoeval(ds.coco, dets)
    assert ev.stats[1] in (-1.0, 1.0) or 0 <= ev.stats[1] <= 1
    run_cocoeval(ds.coco, [])


def test_fuzzed_coco_documents_end_in_a_set_or_an_edgekit_error(shapes, tmp_path):
    pytest.importorskip("pycocotools")
    base = json.loads((shapes / "annotations.json").read_text())
    (tmp_path / "images").symlink_to(shapes / "images")
    rng = random.Random(31)
    outcomes = {"set": 0, "refused": 0}
    for k in range(300):
        doc = _mutate(base, rng)
        ann = tmp_path / "instances.json"
        ann.write_text(json.dumps(doc))
        try:
            ds = read_detection_set(ann)
        except EdgekitError as exc:
            assert exc.exit_code == 3 and "\n" not in str(exc), (k, str(exc))
            outcomes["refused"] += 1
            continue
        _scores(ds)
        outcomes["set"] += 1
    assert min(outcomes.values()) > 20, outcomes  # the mutations reach both ends


def test_fuzzed_yolo_folders_end_in_a_set_or_an_edgekit_error(shapes, tmp_path):
    pytest.importorskip("pycocotools")
    root = yolo_copy(shapes, tmp_path)
    good = {f.name: f.read_text() for f in (root / "labels").iterdir()}
    rng = random.Random(35)
    tokens = [
        "0",
        "1",
        "2",
        "-1",
        "3",
        "1e309",
        "nan",
        "0.5",
        "-0.5",
        "2",
        "1e-30",
        "999999999999",
        "x",
        "",
        "0x1",
        "1.0",
        "\x00",
        "\u0663",
    ]
    yamls = [
        "names: [a, b, c]\n",
        "names: {0: a, 2: b}\n",
        "names:\n  - a\n",
        "names:\n  0: a\n  1: b\n  2: c\n",
        "names: {999999999999: x}\n",
        "names: []\n",
        "names: x\n",
        "path: /\nnames: [a]\n",
    ]
    outcomes = {"set": 0, "refused": 0}
    for k in range(300):
        for name, text in good.items():
            lines = text.splitlines()
            if rng.random() < 0.4 and lines:
                i = rng.randrange(len(lines))
                parts = lines[i].split()
                parts[rng.randrange(len(parts))] = rng.choice(tokens)
                if rng.random() < 0.2:
                    parts = parts[: rng.randrange(len(parts) + 1)]
                lines[i] = " ".join(parts)
            (root / "labels" / name).write_text("\n".join(lines) + "\n")
        (root / "data.yaml").write_text(rng.choice(yamls))
        try:
            ds = read_detection_set(root)
            check_classes(ds, 3)
        except EdgekitError as exc:
            assert exc.exit_code == 3 and "\n" not in str(exc), (k, str(exc))
            outcomes["refused"] += 1
            continue
        _scores(ds)
        assert all(np.isfinite(a["bbox"]).all() and min(a["bbox"][2:]) > 0 for a in ds.coco["annotations"])
        outcomes["set"] += 1
    assert min(outcomes.values()) > 20, outcomes


def test_labels_data_yaml_is_read_as_its_names(tmp_path):
    """Issue 35 item 3: ``quantize``/``build --labels data.yaml`` records the dataset's names (was read as a labels
    file, one 'label' per line of YAML: 'path: .', 'names:'...)."""
    from edgekit.converters.quantize import read_labels

    (tmp_path / "data.yaml").write_text("path: .\nval: images/val\nnames: {0: person, 1: 'fire hydrant'}\n")
    assert read_labels(str(tmp_path / "data.yaml")) == ["person", "fire hydrant"]
    (tmp_path / "bare.yml").write_text("path: .\nval: images/val\n")
    with pytest.raises(InputError, match="bare.yml: no 'names:'"):
        read_labels(str(tmp_path / "bare.yml"))


def test_calibration_images_of_a_yolo_images_folder_is_that_folder(tmp_path):
    """``--calib data/images`` (its labels beside it in data/labels) was read as the detection data's root and
    sent quantize to data/images/images ("no such file or folder"); a root still gives its images/."""
    from edgekit.detection.data import calibration_images, make_shapes

    make_shapes(tmp_path / "calib", n_images=3, seed=1)
    assert calibration_images(tmp_path / "calib" / "images") == str(tmp_path / "calib" / "images")
    assert calibration_images(tmp_path / "calib") == str(tmp_path / "calib" / "images")
    assert calibration_images(tmp_path / "calib" / "images" / "shapes_0000.png") is None
