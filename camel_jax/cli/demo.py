"""`camel-jax demo`: the end-to-end demo on data shipped in the package (offline)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import _check_destination


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="run the end-to-end demo on data shipped in the package (offline)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--out", default="camel-demo", help="folder for the figures (default ./camel-demo)")
    demo.add_argument("--quick", action="store_true", help="fewer bootstrap resamples and held-out splits")


def run(args: argparse.Namespace) -> None:
    from .._demo import run_demo

    _check_destination(Path(args.out) / "figure")
    run_demo(seed=args.seed, out=args.out, quick=args.quick)
