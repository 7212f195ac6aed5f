"""``edgekit detect`` on the host: images from files, folders and globs through a detector or a bundle.

The detector itself (geometry, preprocessing, inference, decode + NMS) is
:mod:`edgekit.board.detector`, which the Dev Board runs too; this module adds what only the host
has: expanding image arguments, opening a model file with its record (:class:`ModelLoader`, as
classify), reading the layout from the model file, and writing annotated images (``--save``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from edgekit.board.decode import DEFAULT_CONF, DEFAULT_IOU, DEFAULT_MAX_DET
from edgekit.board.detector import Detector
from edgekit.devices.classify import LoadedModel, ModelLoader, expand_images
from edgekit.errors import UsageError
from edgekit.report import SILENT, Reporter
from edgekit.results.detect import DetectionLayout, DetectResult, ImageObjects

# Distinct colours for the classes' boxes (Ultralytics' palette's first entries).
PALETTE = (
    (255, 56, 56),
    (255, 157, 151),
    (255, 112, 31),
    (255, 178, 29),
    (207, 210, 49),
    (72, 249, 10),
    (146, 204, 23),
    (61, 219, 134),
    (26, 147, 52),
    (0, 212, 187),
    (44, 153, 168),
    (0, 194, 255),
    (52, 69, 147),
    (100, 115, 255),
    (0, 24, 236),
    (132, 56, 255),
    (82, 0, 133),
    (203, 56, 255),
    (255, 149, 200),
    (255, 55, 199),
)


def check_thresholds(conf: float, iou: float, max_det: int) -> None:
    if not 0.0 <= conf <= 1.0:
        raise UsageError(f"--conf must be between 0 and 1, got {conf:g}", "e.g. --conf 0.25")
    if not 0.0 <= iou <= 1.0:
        raise UsageError(f"--iou must be between 0 and 1, got {iou:g}", "e.g. --iou 0.45")
    if max_det < 1:
        raise UsageError(f"--max-det must be at least 1, got {max_det}", "e.g. --max-det 100")


def open_detector(
    model: str | os.PathLike,
    *,
    device: str = "auto",
    labels: str | os.PathLike | None = None,
    layout: str | None = None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    num_threads: int | None = None,
    backend: Any = None,
) -> Detector:
    """A :class:`Detector` on a model file or a bundle: opened on the best device (classify's loader), its layout
    read from the file that runs (``layout``: the ``--layout`` name settling an ambiguous model)."""
    loaded = ModelLoader(model, device, backend, num_threads, record_needed=mean is None or std is None)()
    try:
        return detector_for(loaded, model, labels=labels, layout=layout, mean=mean, std=std)
    except BaseException:
        loaded.opened.close()
        raise


def detector_for(
    loaded: LoadedModel,
    model: str | os.PathLike,
    *,
    labels: str | os.PathLike | None = None,
    layout: str | None = None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
) -> Detector:
    """A :class:`Detector` on a model already opened (``edgekit.open``'s, or :func:`open_detector`'s): its layout
    read from the file that runs (``layout``: the ``--layout`` name settling an ambiguous model)."""
    from edgekit.detection.layout import find_layout

    found: DetectionLayout = find_layout(
        loaded.opened.model_path,
        layout,
        record_labels=list(loaded.labels.values()) if loaded.labels else None,
        record=_record_extra(loaded),
    )
    return Detector(loaded, found, str(labels) if labels is not None else None, mean, std, name=str(model))


def _record_extra(loaded: Any) -> dict | None:
    """What edgekit recorded with the model that runs (quantize's ``detection`` entry: its layout), if anything."""
    from edgekit.devices.classify import model_facts
    from edgekit.errors import InputError
    from edgekit.tflite.model_record import find_record

    paths = (
        [loaded.bundle.path(loaded.bundle.cpu_model)]
        if loaded.bundle is not None
        else [loaded.opened.model_path, loaded.opened.requested_path]
    )
    for path in dict.fromkeys(str(p) for p in paths):
        try:
            found = find_record(path, model_facts(path)[1])
        except InputError:
            continue
        if found is not None:
            return found[0].extra
    return None


def detect(
    images: Iterable[str],
    model: str | os.PathLike,
    *,
    device: str = "auto",
    labels: str | os.PathLike | None = None,
    conf: float = DEFAULT_CONF,
    iou: float = DEFAULT_IOU,
    max_det: int = DEFAULT_MAX_DET,
    layout: str | None = None,
    save: str | os.PathLike | None = None,
    mean: tuple[float, ...] | None = None,
    std: tuple[float, ...] | None = None,
    workers: int | None = None,
    num_threads: int | None = None,
    report: Reporter = SILENT,
    on: Any = None,
    remote_path: str | None = None,
) -> DetectResult:
    """Expand ``images`` (files, folders, globs), detect objects in each, and return the result.

    ``report`` is told where the model runs, which layout was found and why, and draws the progress.
    ``save``: a folder where each image is written again with its boxes drawn (never over an input).
    ``on`` (a :class:`~edgekit.devices.remote.SshTarget`): on that board instead, ``model`` being a bundle
    deployed there first when it differs (the layout is read here, from the bundle's model).
    """
    check_thresholds(conf, iou, max_det)
    if on is not None:
        from edgekit.devices import remote

        for flag, value in (("--labels", labels), ("--threads", num_threads), ("--save", save)):
            if value is not None:
                raise UsageError(
                    f"{flag} cannot be combined with --on",
                    "the labels come from the bundle"
                    if flag == "--labels"
                    else "the board's runner picks its threads"
                    if flag == "--threads"
                    else "run detect here to save annotated images",
                )
        return remote.detect(
            list(images),
            model,
            on,
            path=remote_path or remote.DEFAULT_PATH,
            device=device,
            conf=conf,
            iou=iou,
            max_det=max_det,
            layout=layout,
            mean=mean,
            std=std,
            report=report,
        )
    paths, errors = expand_images(images)
    out_dir = None
    if save is not None:
        from edgekit.fileio import require_output_folder

        refuse_saving_among_inputs(Path(save), paths)
        out_dir = require_output_folder(Path(save) / "annotated", report, flag="--save")
    detector = open_detector(
        model, device=device, labels=labels, layout=layout, mean=mean, std=std, num_threads=num_threads
    )
    with detector.opened:
        for note in detector.notes:
            report.tell(note)
        report.note(f"layout {detector.layout.describe()}: " + "; ".join(detector.layout.source))
        report.note(f"preprocessing {detector.spec.describe()} ({detector.spec_source})")
        with report.progress(len(paths), "detecting") as bar:
            result = detector.run(paths, conf, iou, max_det, workers, lambda _p: bar.update(1))
    for n in result.notes:
        report.note(n)
    if out_dir is not None:
        save_annotated(result.results, out_dir)
    from dataclasses import replace

    from edgekit.results.classify import ImageError

    result = replace(result, errors=tuple(ImageError(e["image"], e["error"]) for e in errors) + result.errors)
    # the document's values, as a board's answer reads back (boxes to 2 decimals, scores to 6, each box normalized
    # to its image): the same result here and with on=, its text and --json alike
    return DetectResult.from_dict(result.to_dict())


def refuse_saving_among_inputs(folder: Path, paths: list[str]) -> None:
    """UsageError (exit 2) naming ``--save`` when ``folder`` holds one of the input images: before any work."""
    if not folder.is_dir():
        return
    where = folder.resolve()
    inside = [p for p in paths if Path(p).resolve().parent == where]
    if inside:
        more = f" and {len(inside) - 1} more" if len(inside) > 1 else ""
        raise UsageError(
            f"--save {folder} holds the input image {inside[0]}{more}",
            "choose another folder for --save (a new one is created)",
        )


def save_annotated(results: Iterable[ImageObjects], folder: Path) -> list[Path]:
    """Each image again, with its boxes and labels drawn, into ``folder`` (same name; ``name-2.ext``, ``name-3.ext``...
    when the name is taken, by this run or a file already there). Written atomically; no file is ever replaced,
    so neither is an input."""
    from PIL import ImageDraw

    from edgekit.board.preprocess import open_image
    from edgekit.fileio import atomic_path

    written, taken = [], set()
    for r in results:
        src = Path(r.image)
        stem, suffix = (
            src.stem,
            src.suffix.lower() if src.suffix.lower() in (".jpg", ".jpeg", ".png", ".bmp") else ".png",
        )
        name, n = stem + suffix, 1
        while name in taken or os.path.lexists(folder / name):
            n += 1
            name = f"{stem}-{n}{suffix}"
        taken.add(name)
        target = folder / name
        image = open_image(r.image).convert("RGB")
        draw = ImageDraw.Draw(image)
        width = max(1, round(max(image.size) / 300))
        for o in r.objects:
            colour = PALETTE[o.id % len(PALETTE)]
            b = o.bbox
            draw.rectangle([b.xmin, b.ymin, b.xmax, b.ymax], outline=colour, width=width)
            text = f"{o.label if o.label is not None else o.id} {o.score:.2f}"
            tx, ty = b.xmin, max(0.0, b.ymin - 11)
            box = draw.textbbox((tx, ty), text)
            draw.rectangle(box, fill=colour)
            draw.text((tx, ty), text, fill=(255, 255, 255))
        with atomic_path(target) as tmp:
            image.save(tmp, format={".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".bmp": "BMP"}[suffix])
        written.append(target)
    return written
