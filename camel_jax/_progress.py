"""One progress bar for the long steps (bootstrap chunks, calibration folds, `--law auto`'s held-out fits): counts
on stderr, drawn only when stderr is a terminal, so that logs and pipes stay clean."""

from __future__ import annotations

import sys
from typing import TextIO

WIDTH = 30


def progress_bar(done: int, total: int, label: str, unit: str, stream: TextIO | None = None) -> None:
    """Draw `label [####......] done/total unit` in place (a carriage return, no newline until `done == total`).

    **Arguments**:

    - `done`, `total`: the counts so far and in all.
    - `label`: what is running (e.g. "bootstrap"); `unit`: what is counted (e.g. "resamples").
    - `stream`: where to draw (default `sys.stderr`); nothing is drawn unless it is a terminal.

    **Returns**: None.
    """
    stream = sys.stderr if stream is None else stream
    try:
        if not stream.isatty():
            return
    except (AttributeError, ValueError):  # a closed or foreign stream: no bar
        return
    filled = int(WIDTH * done / total) if total > 0 else WIDTH
    stream.write(f"\r{label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total} {unit}")
    if done >= total:
        stream.write("\n")
    stream.flush()
