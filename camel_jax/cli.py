"""The `camel-jax` command line: `camel-jax demo | --version`."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="camel-jax", description="Data-mixture scaling laws in JAX.")
    parser.add_argument("--version", action="version", version=f"camel-jax {__version__}")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the end-to-end demo on data shipped in the package (offline)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--out", default="camel-demo", help="folder for the figures (default ./camel-demo)")
    demo.add_argument("--quick", action="store_true", help="a smaller run, for tests")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "demo":
        from ._demo import run_demo

        run_demo(seed=args.seed, out=args.out, quick=args.quick)
        return 0
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
