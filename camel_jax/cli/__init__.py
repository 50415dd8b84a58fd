"""The `camel-jax` command line (also `python -m camel_jax`), one module per subcommand.

    camel-jax demo                       the end-to-end demo (offline)
    camel-jax fit runs.csv               fit a mixture law to a CSV -> JSON with intervals, .npz, figure
    camel-jax optimize fit.npz --size 20 optimal mixture for a target size from a saved fit or pipeline
    camel-jax predict fit.npz rows.csv   a saved fit's predictions at new rows, with their 95% band -> CSV
    camel-jax next --fit fit.npz ...     the candidate runs that would most sharpen the decision -> CSV
    camel-jax design --sizes 4,5,6 ...   choose runs under a FLOPs budget -> CSV

The subcommands are thin: they read and check the user's input, call the library, and print. A problem with the
user's input (a missing file or column, bad values) exits with code 2 and one line; Ctrl-C with code 130.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from typing import Any

from .._version import __version__
from . import demo, design, fit, optimize, predict
from . import next as next_command
from ._common import UserError, configure_jax
from ._names import for_command_line

__all__ = ["main", "configure_jax", "UserError"]

_COMMANDS = {"demo": demo, "fit": fit, "optimize": optimize, "next": next_command, "design": design,
             "predict": predict}  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="camel-jax", description="Data-mixture scaling laws in JAX.")
    parser.add_argument("--version", action="version", version=f"camel-jax {__version__}")
    sub = parser.add_subparsers(dest="command")
    for module in _COMMANDS.values():
        module.add_parser(sub)
    return parser


def _negative_values(argv: list[str]) -> list[str]:
    """`--lower -0.1,0.2` as `--lower=-0.1,0.2`: argparse reads a value starting with '-' as an option unless it
    is one plain negative number (`-0.1`), so a list of numbers (or `-1e-3`) after an option is joined to it."""
    out: list[str] = []
    for token in argv:
        numbers = re.fullmatch(r"-[\d.][\d.eE+,\s-]*", token) and re.search(r"[,eE]", token)
        if out and out[-1].startswith("--") and "=" not in out[-1] and numbers:
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def _warning_lines() -> Any:
    """A `warnings.showwarning` that prints each Python warning raised during a subcommand as a `warning: <message>`
    line (once each), not as `file:line: UserWarning` followed by a line of camel-jax's own source."""
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        text = for_command_line(" ".join(str(message).split()))
        if text not in shown:
            shown.add(text)
            print(f"warning: {text}", flush=True)

    return show


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns the exit code (0, 2 for the user's input, 130 on Ctrl-C)."""
    parser = _parser()
    args = parser.parse_args(_negative_values(sys.argv[1:] if argv is None else list(argv)))
    if args.command is None:
        parser.print_help()
        return 0
    with warnings.catch_warnings():
        warnings.showwarning = _warning_lines()
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command != "design":
            configure_jax()
        _COMMANDS[args.command].run(args)
    except UserError as error:
        print(f"camel-jax {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"camel-jax {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, FileNotFoundError, OSError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"camel-jax {args.command}: error: {message}", file=sys.stderr)
        return 2
    return 0
