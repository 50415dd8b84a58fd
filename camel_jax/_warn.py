"""Warnings that name the caller's line: the first frame outside camel_jax, however deep inside the package the
warning arises (a fixed `stacklevel` names the right line only for one call path: `fit` called by `fit_pipeline`
named a line of the pipeline, not of the notebook that called it)."""

from __future__ import annotations

import os
import sys

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The `stacklevel` for a `warnings.warn` in the function that calls this: the first frame outside camel_jax
    (1 when that function is not in the package; the outermost frame when the whole stack is, as under
    `python -m camel_jax`)."""
    frame = sys._getframe(1)  # the function about to warn: stacklevel 1
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level
