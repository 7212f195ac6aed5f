"""Image arguments as ``edgekit classify`` takes them (files, folders, globs), expanded on the host.

Used by the local classify and by the one on a board over SSH (:mod:`edgekit.devices.remote`), which
both sit above it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from edgekit.board.preprocess import IMAGE_EXTENSIONS, is_hidden


def expand_images(args: Iterable[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Files, folders (their images and those of their subfolders, sorted; hidden ones skipped, as by a
    glob's ``*``) and globs → (image paths, errors)."""
    images: list[str] = []
    errors: list[dict[str, str]] = []
    for arg in args:
        if arg.strip() and os.path.isfile(
            arg
        ):  # what the branches below do for a file, without pathlib and glob (start-up)
            images.append(arg)
            continue
        import glob
        from pathlib import Path

        p = Path(arg)
        if not arg.strip():  # Path("") is the current folder: an unset shell variable must not scan it
            errors.append({"image": arg, "error": "an image argument is empty (is a shell variable unset?)"})
        elif p.is_dir():
            found = sorted(
                str(c)
                for c in p.rglob("*")
                if c.suffix.lower() in IMAGE_EXTENSIONS and c.is_file() and not is_hidden(c.relative_to(p))
            )
            if not found:
                kinds = ", ".join(sorted(IMAGE_EXTENSIONS))
                errors.append({"image": arg, "error": f"{arg}: folder holds no images (only {kinds} files are read)"})
            images += found
        elif p.exists():
            images.append(arg)
        elif glob.has_magic(arg):
            found = sorted(m for m in glob.glob(arg, recursive=True) if Path(m).is_file())
            if not found:
                errors.append(
                    {
                        "image": arg,
                        "error": f"{arg}: no file matches this pattern (check the folder and the "
                        "pattern; quote it so the shell leaves the * alone)",
                    }
                )
            images += found
        else:
            errors.append({"image": arg, "error": f"{arg}: no such file (check the path)"})
    return images, errors
