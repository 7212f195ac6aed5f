"""Labelled detection data on disk: COCO JSON and YOLO folders read, and synthetic shapes written.

Reading: :func:`read_detection_set` takes a COCO annotation file (``instances.json`` with ``images``,
``annotations``, ``categories``; the images in ``--images`` or beside the file, by ``file_name``) or
a YOLO folder (``images/`` + ``labels/<stem>.txt`` with ``class cx cy w h`` normalized per line, an
absent or empty file meaning an image without objects; class names from ``classes.txt``,
``data.yaml``'s ``names``, or the classes its labels use). Both become one :class:`DetectionSet` whose
``coco`` is the ground truth pycocotools reads. Files from strangers: every entry and line is checked
(an InputError naming it), no list is sized by a number a file gives, no file outside the data's folders
is read (names and links), and boxes are clipped to their image, each change counted in ``notes``.

Writing: :func:`make_shapes` draws rectangles, ellipses and triangles of a few classes at random
sizes (tiny ones included), on random backgrounds, and writes both label formats for the same
images. Deterministic for a seed; no downloads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, TypedDict

import numpy as np

from edgekit.errors import Caution, InputError, first_line, parse_json, regular_file, shown

SHAPE_CLASSES = ("rectangle", "ellipse", "triangle")


# COCO's object detection format (https://cocodataset.org/#format-data), the keys edgekit reads and writes. They are
# TypedDicts, not records: pycocotools takes and keeps plain dicts, and a user's file may hold more keys.
class CocoImage(TypedDict):
    id: int
    file_name: str
    width: int
    height: int


class CocoAnnotation(TypedDict):
    id: int
    image_id: int
    category_id: int
    bbox: list[float]  # x, y, width, height in pixels
    area: float
    iscrowd: int


class CocoCategory(TypedDict):
    id: int
    name: str


class CocoDataset(TypedDict, total=False):
    """A ground truth: ``images``, ``annotations`` and ``categories`` (``info`` when the file has it)."""

    images: list[CocoImage]
    annotations: list[CocoAnnotation]
    categories: list[CocoCategory]
    info: dict[str, str | int]


class CocoDetection(TypedDict):
    """One detection in COCO's results format (what ``COCO.loadRes`` reads)."""

    image_id: int
    category_id: int
    score: float
    bbox: list[float]  # x, y, width, height in pixels


@dataclass(frozen=True)
class DetectionSet:
    """Images with boxes: ``coco`` is a COCO ground-truth dict (boxes as x, y, w, h in pixels); ``paths`` by
    image id; ``origins`` where each annotation was read (a YOLO label's ``file:line``, by annotation id);
    ``notes`` what reading changed or noticed (boxes clipped or skipped, a name used twice), for the user."""

    source: str
    kind: str  # coco | yolo
    coco: CocoDataset
    paths: dict[int, str]  # image id -> file path
    origins: dict[int, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what reading changed or chose (boxes clipped, the one split of several)
    names_from: str | None = None  # the file the class names are from (data.yaml, classes.txt); None: class numbers

    @property
    def categories(self) -> list[CocoCategory]:
        return sorted(self.coco["categories"], key=lambda c: c["id"])

    def __len__(self) -> int:
        return len(self.coco["images"])


COCO_HINT = "fix the entry: COCO's format is at https://cocodataset.org/#format-data"
LINK_HINT = "keep the data's files inside its folders (copy the file in rather than linking out)"
YOLO_HINT = "one object per line, class id then the box normalized to the image"
MAX_ID = 2**63  # ids are int64 to numpy (pycocotools sorts and indexes by them)


def read_detection_set(
    source: str | os.PathLike, images: str | os.PathLike | None = None, flag: str = "--data"
) -> DetectionSet:
    """A COCO annotation file or a YOLO folder, every entry checked (InputError naming the entry or file:line):
    what it returns pycocotools can score."""
    p = Path(source)
    regular_file(p, flag)
    if p.is_file() and p.suffix.lower() == ".json":
        return read_coco(p, images, flag)
    found = ultralytics_split(p, flag)
    if found is not None:
        root, images_dir, labels_dir, names, note = found
        dataset = read_yolo(root, flag, images_dir, labels_dir, names)
        return dataclasses.replace(dataset, notes=dataset.notes + (note,)) if note else dataset
    if p.is_dir() and (p / "labels").is_dir() and (p / "images").is_dir():
        return read_yolo(p, flag)
    if not p.exists():
        raise InputError(f"{flag} {p}: no such file or folder", "check the path")
    raise InputError(
        f"{flag} {p}: not a COCO annotation file (.json) or a YOLO folder (images/ + labels/)",
        "pass instances.json (with --images DIR) or a folder holding images/ and labels/",
    )


def is_detection_data(source: str | os.PathLike) -> bool:
    """Whether ``--data`` names detection data (a .json file, or a folder with images/ and labels/)."""
    from edgekit.board.preprocess import IMAGE_EXTENSIONS

    p = Path(source)
    if p.suffix.lower() == ".json" and p.is_file():
        return True
    if (
        p.suffix.lower() in (".yaml", ".yml")
        and p.is_file()
        or _images_split_dir(p) is not None
        or len(_splits(p)) >= 2
    ):
        return True
    if not ((p / "labels").is_dir() and (p / "images").is_dir()):
        return False
    try:  # class folders named "images" and "labels" would hold images in both: labels/ holds .txt files
        return not any(f.suffix.lower() in IMAGE_EXTENSIONS for f in (p / "labels").iterdir())
    except OSError:
        return False


def calibration_images(source: str | os.PathLike) -> str | None:
    """The image folder of detection data named as calibration data (a YOLO folder's images/, an image folder
    itself, a COCO file's folder or its images/), for quantize to calibrate on; None for anything else."""
    p = Path(source)
    if not is_detection_data(p):
        return None
    if p.is_dir():  # an image folder named as Ultralytics names a split (images/val, images) is its own images
        return str(p) if _images_split_dir(p) is not None else str(p / "images")
    return str(p.parent / "images") if (p.parent / "images").is_dir() else str(p.parent)


# ------------------------------------------------------------------------------------ checks every reader uses
def _show(value: object) -> str:
    """A value from a data file, short and safe to print."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return shown(text if len(text) <= 40 else text[:37] + "...")


def _integer(entry: dict, key: str, where: str, low: int = 0, high: int = MAX_ID) -> int:
    """``entry[key]`` as an int in [low, high) (a bool, a float or a string is no id); else InputError."""
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        said = f"{key} is {_show(value)}" if key in entry else f"no {key}"
        raise InputError(f"{where}: {said}: expected an integer from {low} to {high - 1}", COCO_HINT)
    return value


def _number(value: object) -> float | None:
    """A finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def within(root: Path, path: Path, where: str) -> None:
    """Refuse (InputError naming ``where``) a ``path`` that leads outside ``root`` once links are resolved."""
    try:
        real, base = path.resolve(), root.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop
        raise InputError(f"{where}: {shown(str(path))} cannot be resolved ({first_line(exc)})", LINK_HINT) from None
    if real != base and base not in real.parents:
        raise InputError(
            f"{where}: {shown(str(path))} leads outside {shown(str(root))} (to {shown(str(real))})", LINK_HINT
        )


def inside(root: Path, name: object, where: str) -> Path:
    """``root / name`` for a file name a data file gives: relative, no ``..``, no NUL, not empty, and not a link
    out of ``root``; else InputError naming ``where``."""
    hint = "name each image by its path inside the image folder (--images DIR; default: beside the file)"
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise InputError(f"{where}: file_name is {_show(name)}: expected a file name", hint)
    win = PureWindowsPath(name)  # splits on both / and \
    if PurePosixPath(name).is_absolute() or win.drive or win.root or ".." in win.parts:
        raise InputError(f"{where}: file_name {_show(name)} is absolute or climbs out with '..'", hint)
    within(root, root / name, where)
    return root / name


def fit_box(x0: float, y0: float, x1: float, y1: float, width: int, height: int) -> tuple[list[float] | None, bool]:
    """A box's corners (pixels) clipped to its image: ([x, y, w, h], clipped by more than a pixel), or (None, ...)
    when nothing of it is inside."""
    cx0, cy0, cx1, cy1 = max(x0, 0.0), max(y0, 0.0), min(x1, float(width)), min(y1, float(height))
    if not (cx1 > cx0 and cy1 > cy0):
        return None, False
    moved = max(cx0 - x0, cy0 - y0, x1 - cx1, y1 - cy1) > 1.0
    return [cx0, cy0, cx1 - cx0, cy1 - cy0], moved


def box_notes(skipped: list[str], clipped: list[str]) -> list[str]:
    """The counted notes on boxes not scored as written."""
    notes = []
    if skipped:
        notes.append(
            f"{len(skipped)} box(es) with no area inside their image (a width or height <= 0, or wholly "
            f"outside) are not scored, e.g. {skipped[0]}"
        )
    if clipped:
        notes.append(
            f"{len(clipped)} box(es) reaching more than a pixel outside their image are clipped to it, "
            f"e.g. {clipped[0]}"
        )
    return notes


def name_notes(categories: list[CocoCategory]) -> list[str]:
    """A caution when two categories share a name: classes are then matched to them by order, not by name."""
    ids: dict[str, list[int]] = {}
    for c in categories:
        ids.setdefault(c["name"], []).append(c["id"])
    twice = {n: i for n, i in ids.items() if len(i) > 1}
    if not twice:
        return []
    name, first = next(iter(twice.items()))
    return [
        Caution(
            f"{len(twice)} category name(s) are used by more than one category, e.g. {_show(name)} by ids "
            f"{', '.join(map(str, first[:5]))}: model classes are matched to categories by order, not by "
            "name; give each category its own name"
        )
    ]


def check_scoreable(dataset: DetectionSet, where: str) -> None:
    """Refuse a set with no image or no object to score: pycocotools would give every mAP as -1."""
    if not dataset.coco["images"]:
        raise InputError(f"{where}: holds no images: nothing to score", "pass a set with images and their objects")
    if not any(not a["iscrowd"] for a in dataset.coco["annotations"]):
        raise InputError(
            f"{where}: holds no object to score (no annotation, or only crowd regions or boxes with "
            "no area): every mAP would be undefined",
            "add the objects' boxes (COCO annotations, or YOLO labels/<image>.txt lines)",
        )


def check_classes(dataset: DetectionSet, num_classes: int, flag: str = "--data") -> None:
    """Refuse (naming file:line) a YOLO object whose class is beyond the model's ``num_classes``: a YOLO label's
    class is the model's class index. Called before any image runs."""
    if dataset.kind != "yolo" or not num_classes:
        return
    for a in dataset.coco["annotations"]:
        if a["category_id"] >= num_classes:
            raise InputError(
                f"{flag}: {shown(dataset.origins.get(a['id'], dataset.source))}: class "
                f"{a['category_id']} is beyond the model's {num_classes} classes (0 to "
                f"{num_classes - 1})",
                "fix the label, or evaluate the model trained on these classes",
            )


# ------------------------------------------------------------------------------------ COCO
def read_coco(path: Path, images: str | os.PathLike | None, flag: str = "--data") -> DetectionSet:
    where = f"{flag} {shown(str(path))}"
    hint = "pass a COCO annotation file: images, annotations and categories"
    doc = parse_json(path.read_bytes(), where, hint)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("images", "categories")):
        raise InputError(f"{where}: not a COCO annotation file (no images or categories list)", hint)
    if not isinstance(doc.get("annotations", []), list):
        raise InputError(f"{where}: annotations is {_show(doc['annotations'])}, not a list", hint)
    root = Path(images) if images is not None else path.parent
    imgs, paths = _coco_images(doc["images"], root, path.parent / "images" if images is None else None, where)
    cats = _coco_categories(doc["categories"], where)
    notes: list[str] = name_notes(cats)
    anns = _coco_annotations(
        doc.get("annotations", []), {im["id"]: im for im in imgs}, {c["id"] for c in cats}, where, notes
    )
    dataset = DetectionSet(
        str(path), "coco", {"images": imgs, "annotations": anns, "categories": cats}, paths, notes=tuple(notes)
    )
    check_scoreable(dataset, where)
    missing = [p for p in paths.values() if not Path(p).is_file()]
    if missing:
        raise InputError(
            f"{where}: {len(missing)} image(s) not found, e.g. {shown(missing[0])}",
            "pass the folder holding them with --images DIR",
        )
    return dataset


def _coco_images(
    entries: list, root: Path, fallback: Path | None, where: str
) -> tuple[list[CocoImage], dict[int, str]]:
    """The images (id, file_name, width, height), each checked; their paths in ``root`` (else in ``fallback``)."""
    images: list[CocoImage] = []
    paths: dict[int, str] = {}
    for k, im in enumerate(entries):
        at = f"{where}: images[{k}]"
        if not isinstance(im, dict):
            raise InputError(f"{at} is {_show(im)}, not an object", COCO_HINT)
        iid = _integer(im, "id", at)
        at += f" (id {iid})"
        if iid in paths:
            raise InputError(f"{at}: image id {iid} appears twice", COCO_HINT)
        f = inside(root, im.get("file_name"), at)
        if fallback is not None and not f.is_file() and (fallback / im["file_name"]).is_file():
            f = inside(fallback, im["file_name"], at)
        width, height = _number(im.get("width")), _number(im.get("height"))
        if width is None or height is None or not all(v >= 1 and v == int(v) for v in (width, height)):
            raise InputError(
                f"{at}: width {_show(im.get('width'))} and height {_show(im.get('height'))}: expected "
                "the image's size in pixels (whole numbers)",
                COCO_HINT,
            )
        images.append({"id": iid, "file_name": im["file_name"], "width": int(width), "height": int(height)})
        paths[iid] = str(f)
    return images, paths


def _coco_categories(entries: list, where: str) -> list[CocoCategory]:
    """The categories (id, name), each checked: an id appears once, every category has a name."""
    cats: list[CocoCategory] = []
    seen: dict[int, int] = {}
    for k, c in enumerate(entries):
        at = f"{where}: categories[{k}]"
        if not isinstance(c, dict):
            raise InputError(f"{at} is {_show(c)}, not an object", COCO_HINT)
        cid = _integer(c, "id", at)
        if cid in seen:
            raise InputError(
                f"{at}: category id {cid} appears twice (also categories[{seen[cid]}])", "give each category its own id"
            )
        seen[cid] = k
        name = c.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InputError(
                f"{at} (id {cid}): name is {_show(name) if 'name' in c else 'missing'}: every category needs a name",
                COCO_HINT,
            )
        cats.append({"id": cid, "name": name})
    return cats


def _coco_annotations(
    entries: list, images: dict[int, CocoImage], categories: set[int], where: str, notes: list[str]
) -> list[CocoAnnotation]:
    """The annotations, each checked, boxes clipped to their image (counted in ``notes``), ids given to those
    without one."""
    out: list[CocoAnnotation] = []
    seen: set[int] = set()
    skipped: list[str] = []
    clipped: list[str] = []
    unnumbered: list[int] = []  # positions in out of the annotations without an id (given one at the end)
    for k, a in enumerate(entries):
        at = f"{where}: annotations[{k}]"
        if not isinstance(a, dict):
            raise InputError(f"{at} is {_show(a)}, not an object", COCO_HINT)
        aid = _integer(a, "id", at) if "id" in a else None
        if aid is not None:
            at += f" (id {aid})"
            if aid in seen:
                raise InputError(f"{at}: annotation id {aid} appears twice", COCO_HINT)
            seen.add(aid)
        iid, cid = _integer(a, "image_id", at), _integer(a, "category_id", at)
        if iid not in images or cid not in categories:
            raise InputError(
                f"{at}: names an unknown {'image' if iid not in images else 'category'} "
                f"({iid if iid not in images else cid})",
                COCO_HINT,
            )
        x, y, w, h = _coco_box(a, at)
        crowd, area = a.get("iscrowd", 0), a.get("area", 0)
        if isinstance(crowd, float) or crowd not in (0, 1) or _number(area) is None or area < 0:
            raise InputError(
                f"{at}: iscrowd {_show(crowd)}, area {_show(area)}: expected iscrowd 0 or 1 and an "
                "area in square pixels",
                COCO_HINT,
            )
        box, moved = (
            fit_box(x, y, x + w, y + h, images[iid]["width"], images[iid]["height"])
            if w > 0 and h > 0
            else (None, False)
        )
        if box is None:
            skipped.append(at[len(where) + 2 :])
            continue
        if moved:
            clipped.append(at[len(where) + 2 :])
        if aid is None:
            unnumbered.append(len(out))
        out.append(
            {
                "id": aid if aid is not None else 0,
                "image_id": iid,
                "category_id": cid,
                "bbox": box,
                "area": float(area) if "area" in a else box[2] * box[3],
                "iscrowd": int(crowd),
            }
        )
    next_id = max(seen, default=0) + 1
    for i in unnumbered:
        out[i]["id"], next_id = next_id, next_id + 1
    notes += box_notes(skipped, clipped)
    return out


def _coco_box(annotation: dict, at: str) -> list[float]:
    box = annotation.get("bbox")
    values = [_number(v) for v in box] if isinstance(box, list) and len(box) == 4 else []
    numbers = [v for v in values if v is not None]
    if len(numbers) != 4:
        raise InputError(
            f"{at}: bbox is {_show(box) if 'bbox' in annotation else 'missing'}: expected [x, y, "
            "width, height], four finite numbers in pixels",
            COCO_HINT,
        )
    return numbers


# ------------------------------------------------------------------------------------ YOLO
def yaml_names(text: str, where: str) -> list[str] | None:
    """data.yaml's ``names`` in Ultralytics' forms: ``[a, b]``, ``{0: a, 1: b}``, or a block of ``- a`` or
    ``0: a`` lines (no YAML parser needed); None without one. Indices must be 0 to n-1, as Ultralytics requires:
    no list is ever sized by a number a file gives."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("names:"):
            continue
        rest = line[len("names:") :].split(" #")[0].strip()
        if rest.startswith("["):
            return [_unquote(n) for n in rest[1:].rsplit("]", 1)[0].split(",") if n.strip()]
        if rest.startswith("{"):
            items = [kv.split(":", 1) for kv in rest[1:].rsplit("}", 1)[0].split(",") if kv.strip()]
        elif not rest:
            block = []
            for sub in lines[i + 1 :]:
                if sub.strip() and not sub.startswith((" ", "\t")):
                    break
                if sub.strip() and not sub.strip().startswith("#"):
                    block.append(sub.strip())
            if block and all(s == "-" or s.startswith(("- ", "-\t")) for s in block):
                return [_unquote(s[1:]) for s in block]
            items = [s.split(":", 1) for s in block]
        else:
            return None
        return _indexed_names(items, where)
    return None


def _unquote(name: str) -> str:
    return name.strip().strip("'\"")


def _indexed_names(items: list[list[str]], where: str) -> list[str] | None:
    hint = "number the names 0, 1, 2... with no gap (as Ultralytics requires)"
    names: dict[int, str] = {}
    for kv in items:
        try:
            if len(kv) != 2:
                raise ValueError
            k = int(kv[0].strip())
            if k in names:
                raise ValueError
            names[k] = _unquote(kv[1])
        except ValueError:
            raise InputError(
                f"{where}: names: {_show(':'.join(kv).strip())} is not 'index: name' (each index once)", hint
            ) from None
    if any(not 0 <= k < len(names) for k in names):
        bad = next(k for k in names if not 0 <= k < len(names))
        raise InputError(
            f"{where}: names has {len(names)} entries but an index {_show(bad)}: indices must be 0 to {len(names) - 1}",
            hint,
        )
    return [names[k] for k in range(len(names))] or None


def yolo_names(folder: Path, where: str) -> tuple[list[str] | None, str]:
    """(class names, the file they are from): ``classes.txt``, else ``data.yaml``'s ``names``; (None, "") without."""
    f = folder / "classes.txt"
    regular_file(f, "classes file")
    if f.is_file():
        return [
            ln.strip() for ln in f.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()
        ], "classes.txt"
    y = folder / "data.yaml"
    regular_file(y, "data file")
    if y.is_file():
        names = yaml_names(y.read_text(encoding="utf-8", errors="replace"), f"{where}: data.yaml")
        if names is not None:
            return names, "data.yaml"
    return None, ""


def yolo_images(folder: Path, where: str) -> list[Path]:
    """The images of a folder and its subfolders, sorted, hidden ones skipped (as classify does); a link out of the
    folder is refused."""
    from edgekit.board.preprocess import IMAGE_EXTENSIONS, is_hidden

    files = sorted(
        f
        for f in folder.rglob("*")
        if f.suffix.lower() in IMAGE_EXTENSIONS and not is_hidden(f.relative_to(folder)) and f.is_file()
    )
    for f in files:
        within(folder, f, where)
    return files


def yolo_label(label: Path, labels: Path, where: str) -> list[tuple[str, int, list[float]]]:
    """The objects of one label file inside ``labels``: (file:line, class, [cx, cy, w, h] normalized). An absent
    file is an image without objects."""
    if not label.exists() and not label.is_symlink():
        return []
    within(labels, label, where)
    if label.is_dir():
        raise InputError(f"{where}: the label file {shown(str(label))} is a folder", YOLO_HINT)
    regular_file(label, f"{where}: label file")
    try:
        text = label.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{where}: cannot read {shown(str(label))} ({first_line(exc)})", YOLO_HINT) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) != 5:
                raise ValueError(f"{len(parts)} values")
            c, box = int(parts[0]), [float(v) for v in parts[1:]]
            if not 0 <= c < MAX_ID or not all(math.isfinite(v) for v in box):
                raise ValueError("a negative or huge class, or a non-finite number")
        except ValueError as exc:
            raise InputError(
                f"{where}: {shown(str(label))}:{n}: not 'class cx cy w h' ({first_line(exc, 80)})", YOLO_HINT
            ) from None
        out.append((f"{label}:{n}", c, box))
    return out


# ------------------------------------------------------------------------- one split, as Ultralytics names it
EVAL_SPLITS = ("val", "valid", "validation")  # the split evaluate scores where a root holds several


def _from_data_yaml(y: Path, flag: str) -> tuple[Path, Path, Path, list[str] | None, None]:
    """Ultralytics' data.yaml: its ``val:`` image folder (against ``path:``, else the file's folder), the labels
    beside it by Ultralytics' rule, and ``names``. Read as the few top-level keys it has: no YAML parser needed."""
    regular_file(y, flag)
    text = y.read_text(encoding="utf-8", errors="replace")
    keys = {}
    for line in text.splitlines():
        if line[:1] not in ("", " ", "\t", "#", "-") and ":" in line:
            k, v = line.split(":", 1)
            keys[k.strip()] = v.split(" #", 1)[0].strip().strip("'\"")
    val = keys.get("val", "")
    if not val or val.startswith("[") or val.endswith(".txt"):
        raise InputError(
            f"{flag} {y}: "
            + (f"val: {val} is a list or a file of paths; edgekit reads one image folder" if val else "no val: split"),
            f"pass the val image folder itself: {flag} path/to/images/val",
        )
    base = Path(keys.get("path") or ".")
    images = (base if base.is_absolute() else y.parent / base) / val
    labels = _labels_for(images)
    if not images.is_dir() or labels is None or not labels.is_dir():
        raise InputError(
            f"{flag} {y}: its val: split {images} is not an image folder with a labels folder beside it "
            "(.../images/... -> .../labels/...)",
            "Ultralytics reads a relative path: against its "
            f"datasets_dir; give path: as an absolute folder, or pass the image folder with {flag}",
        )
    return images.parent, images, labels, yaml_names(text, f"{flag} {y}"), None


def _labels_for(images_dir: Path) -> Path | None:
    """Ultralytics' rule: the labels of ``.../images/x`` are in ``.../labels/x`` (its last ``images`` folder)."""
    parts = list(images_dir.parts)
    if "images" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("images")
    return Path(*parts[:i], "labels", *parts[i + 1 :])


def _images_split_dir(p: Path) -> Path | None:
    """``p`` when it is an image folder below an ``images`` folder whose labels folder exists (``root/images/val``,
    ``root/valid/images``); else None."""
    labels = _labels_for(p) if p.is_dir() and p.name != "labels" else None
    return p if labels is not None and labels != p and labels.is_dir() and p.parent.name != "" else None


def _splits(p: Path) -> dict[str, tuple[Path, Path]]:
    """A root's splits, {name: (images, labels)}: ``images/<split>`` + ``labels/<split>`` (Ultralytics) or
    ``<split>/images`` + ``<split>/labels`` (Roboflow's export)."""
    out = {}
    if (p / "images").is_dir() and (p / "labels").is_dir():
        out = {
            d.name: (d, p / "labels" / d.name)
            for d in (p / "images").iterdir()
            if d.is_dir() and (p / "labels" / d.name).is_dir()
        }
    elif p.is_dir():
        out = {
            d.name: (d / "images", d / "labels")
            for d in p.iterdir()
            if d.is_dir() and (d / "images").is_dir() and (d / "labels").is_dir()
        }
    return dict(sorted(out.items()))


def ultralytics_split(p: Path, flag: str = "--data") -> tuple[Path, Path, Path, list[str] | None, str | None] | None:
    """(root, images folder, labels folder, class names or None, a note or None) where ``p`` names one split as
    Ultralytics' users name it: a data.yaml (its ``val:`` split and ``names``), an image folder below an
    ``images`` folder (labels found as Ultralytics finds them), or a root holding several splits (its val split,
    said in the note: splits are never pooled; InputError when none is val). None for anything else."""
    from edgekit.board.preprocess import IMAGE_EXTENSIONS

    if p.is_file() and p.suffix.lower() in (".yaml", ".yml"):
        return _from_data_yaml(p, flag)
    split = _images_split_dir(p)
    labels = _labels_for(split) if split is not None else None  # found whenever split is (_images_split_dir)
    if split is not None and labels is not None:
        # the root: the folder holding that "images" folder (its classes.txt or data.yaml)
        root = Path(*split.parts[: len(split.parts) - 1 - split.parts[::-1].index("images")])
        return root, split, labels, None, None
    splits = _splits(p)
    direct = (p / "images").is_dir() and any(f.suffix.lower() in IMAGE_EXTENSIONS for f in (p / "images").iterdir())
    if len(splits) < 2 or direct:
        return None
    chosen = next((s for s in EVAL_SPLITS if s in splits), None)
    if chosen is None:
        raise InputError(
            f"{flag} {p}: holds the splits {', '.join(splits)} and none is val; edgekit scores one split, "
            "never several pooled",
            f"pass the one to score, e.g. {flag} {splits[next(iter(splits))][0]}",
        )
    others = ", ".join(s for s in splits if s != chosen)
    return (
        p,
        splits[chosen][0],
        splits[chosen][1],
        None,
        (
            f"{p} holds the splits {', '.join(splits)}: scoring {chosen} only ({splits[chosen][0]}), never pooled; pass "
            f"another split's image folder to score it ({others})"
        ),
    )


def read_yolo(
    folder: Path,
    flag: str = "--data",
    images_dir: Path | None = None,
    labels_dir: Path | None = None,
    names: list[str] | None = None,
) -> DetectionSet:
    """A YOLO folder (``images/`` + ``labels/``), or one split of it (``images_dir`` with its ``labels_dir``, the
    class ``names`` from a data.yaml), every line checked."""
    from edgekit.board.preprocess import image_size

    images_dir, labels_dir = images_dir or folder / "images", labels_dir or folder / "labels"
    where = f"{flag} {shown(str(folder))}"
    files = yolo_images(images_dir, where)
    if not files:
        raise InputError(
            f"{where}: images/ holds no images", "put the images in images/ and their labels in labels/<same name>.txt"
        )
    names, names_from = (names, "data.yaml") if names is not None else yolo_names(folder, where)
    images: list[CocoImage] = []
    anns: list[CocoAnnotation] = []
    paths: dict[int, str] = {}
    origins: dict[int, str] = {}
    skipped: list[str] = []
    clipped: list[str] = []
    for iid, f in enumerate(files, 1):
        w, h = image_size(f)
        images.append({"id": iid, "file_name": str(f.relative_to(images_dir)), "width": w, "height": h})
        paths[iid] = str(f)
        label = (labels_dir / f.relative_to(images_dir)).with_suffix(".txt")
        for origin, c, (cx, cy, bw, bh) in yolo_label(label, labels_dir, where):
            if names is not None and c >= len(names):
                raise InputError(
                    f"{flag}: {shown(origin)}: class {c} is beyond the {len(names)} names in "
                    f"{names_from} (0 to {len(names) - 1})",
                    f"fix the label, or name every class in {names_from}",
                )
            box, moved = (
                fit_box((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h, w, h)
                if bw > 0 and bh > 0
                else (None, False)
            )
            if box is None:
                skipped.append(shown(origin))
                continue
            if moved:
                clipped.append(shown(origin))
            origins[len(anns) + 1] = origin
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": iid,
                    "category_id": c,
                    "bbox": box,
                    "area": box[2] * box[3],
                    "iscrowd": 0,
                }
            )
    ids = range(len(names)) if names is not None else sorted({a["category_id"] for a in anns})
    cats: list[CocoCategory] = [{"id": k, "name": names[k] if names is not None else str(k)} for k in ids]
    dataset = DetectionSet(
        str(folder),
        "yolo",
        {"images": images, "annotations": anns, "categories": cats},
        paths,
        origins,
        tuple(name_notes(cats) + box_notes(skipped, clipped)),
        names_from if names is not None else None,
    )
    check_scoreable(dataset, where)
    return dataset


# ------------------------------------------------------------------------------------ synthetic shapes
def make_shapes(
    folder: str | os.PathLike,
    n_images: int = 40,
    size: tuple[int, int] = (160, 120),
    seed: int = 0,
    classes: tuple[str, ...] = SHAPE_CLASSES,
    max_objects: int = 4,
    min_side: int = 4,
    max_side: int | None = None,
    empty_every: int = 7,
) -> CocoDataset:
    """Write ``n_images`` images of random shapes with labels in both formats into ``folder``:
    ``images/*.png``, ``labels/*.txt`` (YOLO), ``classes.txt`` and ``annotations.json`` (COCO).

    Each image has a random background (a flat colour, a gradient or noise) and 0..max_objects shapes
    of random class, colour and size (sides from ``min_side`` pixels, tiny objects included); every
    ``empty_every``-th image has none. Returns the COCO dataset.
    """
    from PIL import Image, ImageDraw

    rng = np.random.RandomState(seed)
    root = Path(folder)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    w, h = size
    max_side = max_side or min(w, h) // 2
    images: list[CocoImage] = []
    anns: list[CocoAnnotation] = []
    for i in range(n_images):
        bg = _background(rng, w, h)
        im = Image.fromarray(np.ascontiguousarray(bg))
        draw = ImageDraw.Draw(im)
        lines = []
        count = 0 if empty_every and i % empty_every == empty_every - 1 else rng.randint(1, max_objects + 1)
        for _ in range(count):
            c, (x0, y0, bw, bh) = _draw_shape(draw, rng, bg, classes, min_side, max_side)
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "category_id": c,
                    "bbox": [float(x0), float(y0), float(bw), float(bh)],
                    "area": float(bw * bh),
                    "iscrowd": 0,
                }
            )
            lines.append(f"{c} {(x0 + bw / 2) / w:.6f} {(y0 + bh / 2) / h:.6f} {bw / w:.6f} {bh / h:.6f}")
        name = f"shapes_{i:04d}.png"
        im.save(root / "images" / name)
        (root / "labels" / f"shapes_{i:04d}.txt").write_text("\n".join(lines) + ("\n" if lines else ""))
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
    coco: CocoDataset = {
        "images": images,
        "annotations": anns,
        "categories": [{"id": k, "name": n} for k, n in enumerate(classes)],
    }
    (root / "classes.txt").write_text("\n".join(classes) + "\n")
    (root / "annotations.json").write_text(json.dumps(coco))
    return coco


def shapes_scene(
    size: tuple[int, int], seed: int = 0, count: int = 12, classes: tuple[str, ...] = SHAPE_CLASSES
) -> Any:
    """One image (PIL, RGB, ``size`` = (width, height)) of ``count`` shapes drawn as :func:`make_shapes` draws
    them, on a flat background, sides from a tenth to a third of the image: a frame with objects to time a
    detector's post-processing on (``benchmark``)."""
    from PIL import Image, ImageDraw

    rng = np.random.RandomState(seed)
    w, h = size
    bg = np.broadcast_to(rng.randint(0, 256, 3).astype(np.uint8), (h, w, 3)).copy()
    im = Image.fromarray(bg)
    draw = ImageDraw.Draw(im)
    for _ in range(count):
        _draw_shape(draw, rng, bg, classes, max(2, min(w, h) // 10), max(3, min(w, h) // 3))
    return im


def _background(rng: np.random.RandomState, w: int, h: int) -> np.ndarray:
    """An HxWx3 uint8 background: a flat colour, a horizontal gradient or noise, at random."""
    kind = rng.randint(3)
    if kind == 0:
        return np.broadcast_to(rng.randint(0, 256, 3).astype(np.uint8), (h, w, 3)).copy()
    if kind == 1:
        a, b = rng.randint(0, 256, 3), rng.randint(0, 256, 3)
        t = np.linspace(0, 1, w)[None, :, None]
        return np.broadcast_to(a + (b - a) * t, (h, w, 3)).astype(np.uint8)
    return rng.randint(0, 256, (h, w, 3)).astype(np.uint8)


def _draw_shape(
    draw: Any, rng: np.random.RandomState, bg: np.ndarray, classes: tuple[str, ...], min_side: int, max_side: int
) -> tuple[int, tuple[int, int, int, int]]:
    """One shape of a random class, size and place drawn, in a colour that stands out from the background under it:
    (its class, (x0, y0, width, height))."""
    h, w = bg.shape[:2]
    c = rng.randint(len(classes))
    # log-uniform sides: as many tiny objects as large ones
    bw = int(np.exp(rng.uniform(np.log(min_side), np.log(max_side))))
    bh = int(np.clip(bw * np.exp(rng.uniform(-0.4, 0.4)), min_side, max_side))
    x0, y0 = rng.randint(0, w - bw + 1), rng.randint(0, h - bh + 1)
    x1, y1 = x0 + bw - 1, y0 + bh - 1
    colour = tuple(int(v) for v in rng.randint(0, 256, 3))
    if int(np.abs(np.asarray(colour) - bg[y0 : y1 + 1, x0 : x1 + 1].reshape(-1, 3).mean(0)).sum()) < 120:
        colour = tuple(255 - v for v in colour)  # keep it visible against its background
    shape = classes[c]
    if shape == "rectangle":
        draw.rectangle([x0, y0, x1, y1], fill=colour)
    elif shape == "ellipse":
        draw.ellipse([x0, y0, x1, y1], fill=colour)
    else:
        draw.polygon([(x0, y1), ((x0 + x1) / 2, y0), (x1, y1)], fill=colour)
    return int(c), (int(x0), int(y0), bw, bh)
