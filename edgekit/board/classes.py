"""Class ids: labels files and top-k scoring, pure and shared by ``classify`` and the board runner.

Shipped to a Coral Dev Board by ``edgekit deploy`` (see :mod:`edgekit.board.runner`), so it
stays Python-3.7-compatible and imports only numpy and the standard library (tests check both).
"""

from __future__ import annotations

import re

import numpy as np


def parse_labels(text: str) -> dict[int, str]:
    """Labels in pycoral's formats: ``0 cat`` / ``0: cat`` lines, or one label per line (id = line number).

    Written like pycoral's ``utils/dataset.read_label_file`` so both read a file the same way, except
    that blank lines at the end are not labels (they would make the label count look wrong).
    """
    labels: dict[int, str] = {}
    for row, line in enumerate(text.rstrip().splitlines()):
        pair = re.split(r"[:\s]+", line.strip(), maxsplit=1)
        if len(pair) == 2 and pair[0].strip().isdigit():
            labels[int(pair[0])] = pair[1].strip()
        else:
            labels[row] = line.strip()
    return labels


def top_k(scores: np.ndarray, k: int | None = None, threshold: float = float("-inf")) -> list[tuple[int, float]]:
    """The ``k`` highest ``(class id, score)`` pairs with ``score >= threshold``, best first.

    Equal scores are ordered by class id (lowest first), so the result is deterministic.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    keep = np.flatnonzero(s >= threshold)
    order = keep[np.lexsort((keep, -s[keep]))]
    if k is not None:
        order = order[: max(k, 0)]
    return [(int(i), float(s[i])) for i in order]


def read_labels(path):
    """A labels file read by :func:`parse_labels` (UTF-8, a BOM allowed); InputError with the fix when it cannot be.

    For ``classify`` and ``quantize --labels`` alike (the board runner reads its bundle's labels itself).
    """
    from edgekit.errors import InputError, regular_file

    regular_file(path, "labels file")
    try:
        with open(path, encoding="utf-8-sig") as f:
            return parse_labels(f.read())
    except FileNotFoundError:
        raise InputError("labels file %s does not exist" % path, "check the path, or leave the labels out") from None
    except UnicodeDecodeError:
        raise InputError(
            "labels file %s is not UTF-8 text" % path, "save it as UTF-8, one label per line (or `0 cat` lines)"
        ) from None
    except OSError as exc:
        raise InputError(
            "cannot read labels file %s: %s" % (path, exc.strerror or exc),
            "pass a readable text file, one label per line",
        ) from None
