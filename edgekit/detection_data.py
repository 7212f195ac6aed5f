"""Labelled detection data on disk: COCO JSON and YOLO folders read, and synthetic shapes written.

Reading: :func:`read_detection_set` takes a COCO annotation file (``instances.json`` with ``images``,
``annotations``, ``categories``; the images in ``--images`` or beside the file, by ``file_name``) or
a YOLO folder (``images/`` + ``labels/<stem>.txt`` with ``class cx cy w h`` normalized per line, an
absent or empty file meaning an image without objects; class names from ``classes.txt``,
``data.yaml``'s ``names`` list, or numbers). Both become one :class:`DetectionSet` whose ``coco``
is the ground truth pycocotools reads.

Writing: :func:`make_shapes` draws rectangles, ellipses and triangles of a few classes at random
sizes (tiny ones included), on random backgrounds, and writes both label formats for the same
images. Deterministic for a seed; no downloads.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Union

import numpy as np

from edgekit.errors import InputError, parse_json, regular_file

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
    bbox: list[float]          # x, y, width, height in pixels
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
    info: dict[str, Union[str, int]]


class CocoDetection(TypedDict):
    """One detection in COCO's results format (what ``COCO.loadRes`` reads)."""

    image_id: int
    category_id: int
    score: float
    bbox: list[float]          # x, y, width, height in pixels


@dataclass(frozen=True)
class DetectionSet:
    """Images with boxes: ``coco`` is a COCO ground-truth dict (boxes as x, y, w, h in pixels); ``paths`` by
    image id."""

    source: str
    kind: str                      # coco | yolo
    coco: CocoDataset
    paths: dict[int, str]          # image id -> file path
    notes: tuple[str, ...] = ()    # what was chosen for the user (a split of several), said by the caller

    @property
    def categories(self) -> list[CocoCategory]:
        return sorted(self.coco["categories"], key=lambda c: c["id"])

    def __len__(self) -> int:
        return len(self.coco["images"])


def read_detection_set(source: str | os.PathLike, images: str | os.PathLike | None = None,
                       flag: str = "--data") -> DetectionSet:
    p = Path(source)
    regular_file(p, flag)
    if p.is_file() and p.suffix.lower() == ".json":
        return read_coco(p, images, flag)
    found = ultralytics_split(p, flag)
    if found is not None:
        root, images_dir, labels_dir, names, note = found
        dataset = read_yolo(root, flag, images_dir, labels_dir, names)
        return dataclasses.replace(dataset, notes=(note,)) if note else dataset
    if p.is_dir() and (p / "labels").is_dir() and (p / "images").is_dir():
        return read_yolo(p, flag)
    if not p.exists():
        raise InputError(f"{flag} {p}: no such file or folder", "check the path")
    raise InputError(f"{flag} {p}: not a COCO annotation file (.json) or a YOLO folder (images/ + labels/)",
                     "pass instances.json (with --images DIR) or a folder holding images/ and labels/")


def is_detection_data(source: str | os.PathLike) -> bool:
    """Whether ``--data`` names detection data (a .json file, or a folder with images/ and labels/)."""
    from edgekit.preprocess import IMAGE_EXTENSIONS

    p = Path(source)
    if p.suffix.lower() == ".json" and p.is_file():
        return True
    if p.suffix.lower() in (".yaml", ".yml") and p.is_file() or _images_split_dir(p) is not None \
            or len(_splits(p)) >= 2:
        return True
    if not ((p / "labels").is_dir() and (p / "images").is_dir()):
        return False
    try:   # class folders named "images" and "labels" would hold images in both: labels/ holds .txt files
        return not any(f.suffix.lower() in IMAGE_EXTENSIONS for f in (p / "labels").iterdir())
    except OSError:
        return False


def calibration_images(source: str | os.PathLike) -> str | None:
    """The image folder of detection data named as calibration data (a YOLO folder's images/, a COCO file's
    folder or its images/), for quantize to calibrate on; None for anything else."""
    p = Path(source)
    if not is_detection_data(p):
        return None
    if p.is_dir():
        return str(p / "images")
    return str(p.parent / "images") if (p.parent / "images").is_dir() else str(p.parent)


def read_coco(path: Path, images: str | os.PathLike | None, flag: str = "--data") -> DetectionSet:
    hint = "pass a COCO annotation file: images, annotations and categories"
    doc = parse_json(path.read_bytes(), f"{flag} {path}", hint)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k), list) for k in ("images", "categories")):
        raise InputError(f"{flag} {path}: not a COCO annotation file (no images or categories list)", hint)
    folder = Path(images) if images is not None else path.parent
    paths, seen = {}, set()
    try:
        for im in doc["images"]:
            iid = im["id"]
            if iid in seen:
                raise InputError(f"{flag} {path}: image id {iid} appears twice", hint)
            seen.add(iid)
            f = folder / im["file_name"]
            if not f.is_file() and images is None and (path.parent / "images" / im["file_name"]).is_file():
                f = path.parent / "images" / im["file_name"]
            paths[iid] = str(f)
            int(im["width"]), int(im["height"])
        cats = {c["id"] for c in doc["categories"]}
        anns = doc.get("annotations", [])
        for k, a in enumerate(anns):
            if a["image_id"] not in seen or a["category_id"] not in cats:
                raise InputError(f"{flag} {path}: annotation {a.get('id', k)} names an unknown image or category",
                                 hint)
            x, y, w, h = (float(v) for v in a["bbox"])
            a.setdefault("area", w * h)
            a.setdefault("iscrowd", 0)
            a.setdefault("id", k + 1)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{flag} {path}: malformed COCO entry ({type(exc).__name__}: {exc})", hint) from None
    doc["annotations"] = anns
    missing = [p for p in paths.values() if not Path(p).is_file()]
    if missing:
        raise InputError(f"{flag} {path}: {len(missing)} image(s) not found, e.g. {missing[0]}",
                         "pass the folder holding them with --images DIR")
    return DetectionSet(str(path), "coco", doc, paths)


def _yolo_names(folder: Path, used: set[int]) -> list[str]:
    f = folder / "classes.txt"
    regular_file(f, "classes file")
    if f.is_file():
        return [line.strip() for line in f.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    y = folder / "data.yaml"
    regular_file(y, "data file")
    if y.is_file():  # the names: [a, b] or names: block of "  0: a" lines; no YAML parser needed for these two
        text = y.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            if line.startswith("names:") and "[" in line:
                return [n.strip().strip("'\"") for n in line.split("[", 1)[1].rsplit("]", 1)[0].split(",")]
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "names:":
                names = {}
                for sub in lines[i + 1:]:
                    if not sub.startswith((" ", "\t")) or ":" not in sub:
                        break
                    k, v = sub.split(":", 1)
                    if k.strip().isdigit():
                        names[int(k)] = v.strip().strip("'\"")
                if names:
                    return [names.get(k, str(k)) for k in range(max(names) + 1)]
    return [str(k) for k in range(max(used) + 1 if used else 0)]


# ------------------------------------------------------------------------- one split, as Ultralytics names it
EVAL_SPLITS = ("val", "valid", "validation")   # the split evaluate scores where a root holds several


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
        raise InputError(f"{flag} {y}: " + (f"val: {val} is a list or a file of paths; edgekit reads one image folder"
                                            if val else "no val: split"),
                         f"pass the val image folder itself: {flag} path/to/images/val")
    base = Path(keys.get("path") or ".")
    images = (base if base.is_absolute() else y.parent / base) / val
    labels = _labels_for(images)
    if not images.is_dir() or labels is None or not labels.is_dir():
        raise InputError(f"{flag} {y}: its val: split {images} is not an image folder with a labels folder beside it "
                         "(.../images/... -> .../labels/...)", "Ultralytics reads a relative path: against its "
                         f"datasets_dir; give path: as an absolute folder, or pass the image folder with {flag}")
    return images.parent, images, labels, _yaml_names(text), None


def _yaml_names(text: str) -> list[str] | None:
    """data.yaml's ``names``: ``[a, b]``, a block of ``  0: a`` lines, or a block of ``  - a`` lines."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("names:"):
            continue
        rest = line.split(":", 1)[1].split(" #", 1)[0].strip()
        if rest.startswith("["):
            return [n.strip().strip("'\"") for n in rest[1:].rsplit("]", 1)[0].split(",")]
        block = []
        for sub in lines[i + 1:]:
            if not sub.startswith((" ", "\t")):
                break
            block.append(sub.strip())
        if block and all(b.startswith("- ") for b in block if b):
            return [b[2:].strip().strip("'\"") for b in block if b]
        named = {int(k): v.strip().strip("'\"") for k, v in (b.split(":", 1) for b in block if ":" in b)
                 if k.strip().isdigit()}
        return [named.get(k, str(k)) for k in range(max(named) + 1)] if named else None
    return None


def _labels_for(images_dir: Path) -> Path | None:
    """Ultralytics' rule: the labels of ``.../images/x`` are in ``.../labels/x`` (its last ``images`` folder)."""
    parts = list(images_dir.parts)
    if "images" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("images")
    return Path(*parts[:i], "labels", *parts[i + 1:])


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
        out = {d.name: (d, p / "labels" / d.name) for d in (p / "images").iterdir()
               if d.is_dir() and (p / "labels" / d.name).is_dir()}
    elif p.is_dir():
        out = {d.name: (d / "images", d / "labels") for d in p.iterdir()
               if d.is_dir() and (d / "images").is_dir() and (d / "labels").is_dir()}
    return dict(sorted(out.items()))


def ultralytics_split(p: Path, flag: str = "--data"
                      ) -> tuple[Path, Path, Path, list[str] | None, str | None] | None:
    """(root, images folder, labels folder, class names or None, a note or None) where ``p`` names one split as
    Ultralytics' users name it: a data.yaml (its ``val:`` split and ``names``), an image folder below an
    ``images`` folder (labels found as Ultralytics finds them), or a root holding several splits (its val split,
    said in the note: splits are never pooled; InputError when none is val). None for anything else."""
    from edgekit.preprocess import IMAGE_EXTENSIONS

    if p.is_file() and p.suffix.lower() in (".yaml", ".yml"):
        return _from_data_yaml(p, flag)
    split = _images_split_dir(p)
    if split is not None:   # the root: the folder holding that "images" folder (its classes.txt or data.yaml)
        root = Path(*split.parts[:len(split.parts) - 1 - split.parts[::-1].index("images")])
        return root, split, _labels_for(split), None, None
    splits = _splits(p)
    direct = (p / "images").is_dir() and any(f.suffix.lower() in IMAGE_EXTENSIONS for f in (p / "images").iterdir())
    if len(splits) < 2 or direct:
        return None
    chosen = next((s for s in EVAL_SPLITS if s in splits), None)
    if chosen is None:
        raise InputError(f"{flag} {p}: holds the splits {', '.join(splits)} and none is val; edgekit scores one split, "
                         "never several pooled", f"pass the one to score, e.g. {flag} {splits[next(iter(splits))][0]}")
    others = ", ".join(s for s in splits if s != chosen)
    return p, splits[chosen][0], splits[chosen][1], None, (
        f"{p} holds the splits {', '.join(splits)}: scoring {chosen} only ({splits[chosen][0]}), never pooled; pass "
        f"another split's image folder to score it ({others})")


def read_yolo(folder: Path, flag: str = "--data", images_dir: Path | None = None, labels_dir: Path | None = None,
              names: list[str] | None = None) -> DetectionSet:
    """A YOLO folder (``images/`` + ``labels/``), or one split of it (``images_dir`` with its ``labels_dir``, the
    class ``names`` from a data.yaml)."""
    from edgekit.preprocess import IMAGE_EXTENSIONS, image_size

    images_dir, labels_dir = images_dir or folder / "images", labels_dir or folder / "labels"
    files = sorted(f for f in images_dir.rglob("*") if f.suffix.lower() in IMAGE_EXTENSIONS and f.is_file())
    if not files:
        raise InputError(f"{flag} {folder}: images/ holds no images", "put the images in images/ and their "
                         "labels in labels/<same name>.txt")
    images, anns, paths, used = [], [], {}, set()
    for iid, f in enumerate(files, 1):
        w, h = image_size(f)
        images.append({"id": iid, "file_name": str(f.relative_to(images_dir)), "width": w, "height": h})
        paths[iid] = str(f)
        label = (labels_dir / f.relative_to(images_dir)).with_suffix(".txt")
        if not label.exists():
            continue
        regular_file(label, f"{flag}: label file")
        for n, line in enumerate(label.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            try:
                if len(parts) != 5:
                    raise ValueError(f"{len(parts)} values")
                c, cx, cy, bw, bh = int(parts[0]), *(float(v) for v in parts[1:])
                if c < 0 or not all(np.isfinite([cx, cy, bw, bh])):
                    raise ValueError("a negative class or a non-finite number")
            except ValueError as exc:
                raise InputError(f"{flag}: {label}:{n}: not 'class cx cy w h' ({exc})",
                                 "one object per line, class id then the box normalized to the image") from None
            used.add(c)
            x, y, ww, hh = (cx - bw / 2) * w, (cy - bh / 2) * h, bw * w, bh * h
            anns.append({"id": len(anns) + 1, "image_id": iid, "category_id": c, "bbox": [x, y, ww, hh],
                         "area": ww * hh, "iscrowd": 0})
    names = list(names) if names else _yolo_names(folder, used)
    if used and max(used) >= len(names):
        names += [str(k) for k in range(len(names), max(used) + 1)]
    cats = [{"id": k, "name": n} for k, n in enumerate(names)]
    return DetectionSet(str(folder), "yolo", {"images": images, "annotations": anns, "categories": cats}, paths)


# ------------------------------------------------------------------------------------ synthetic shapes
def make_shapes(folder: str | os.PathLike, n_images: int = 40, size: tuple[int, int] = (160, 120), seed: int = 0,
                classes: tuple[str, ...] = SHAPE_CLASSES, max_objects: int = 4, min_side: int = 4,
                max_side: int | None = None, empty_every: int = 7) -> CocoDataset:
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
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": c,
                         "bbox": [float(x0), float(y0), float(bw), float(bh)], "area": float(bw * bh), "iscrowd": 0})
            lines.append(f"{c} {(x0 + bw / 2) / w:.6f} {(y0 + bh / 2) / h:.6f} {bw / w:.6f} {bh / h:.6f}")
        name = f"shapes_{i:04d}.png"
        im.save(root / "images" / name)
        (root / "labels" / f"shapes_{i:04d}.txt").write_text("\n".join(lines) + ("\n" if lines else ""))
        images.append({"id": i + 1, "file_name": name, "width": w, "height": h})
    coco: CocoDataset = {"images": images, "annotations": anns,
                         "categories": [{"id": k, "name": n} for k, n in enumerate(classes)]}
    (root / "classes.txt").write_text("\n".join(classes) + "\n")
    (root / "annotations.json").write_text(json.dumps(coco))
    return coco


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


def _draw_shape(draw: Any, rng: np.random.RandomState, bg: np.ndarray, classes: tuple[str, ...], min_side: int,
                max_side: int) -> tuple[int, tuple[int, int, int, int]]:
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
    if int(np.abs(np.asarray(colour) - bg[y0:y1 + 1, x0:x1 + 1].reshape(-1, 3).mean(0)).sum()) < 120:
        colour = tuple(255 - v for v in colour)   # keep it visible against its background
    shape = classes[c]
    if shape == "rectangle":
        draw.rectangle([x0, y0, x1, y1], fill=colour)
    elif shape == "ellipse":
        draw.ellipse([x0, y0, x1, y1], fill=colour)
    else:
        draw.polygon([(x0, y1), ((x0 + x1) / 2, y0), (x1, y1)], fill=colour)
    return int(c), (int(x0), int(y0), bw, bh)
