"""Several validation losses in one call (issue 55): `camel-jax fit` on a long table of 22 validation domains,
~100 runs and their checkpoints, against 22 single-target calls, each timed after its compile.

The table is the Data Mixing Laws 5Mix file as its authors published it (../shared/data/external/mixinglaws_ye2024,
one row per run x validation domain x checkpoint: 110 runs at 5 sizes, 22 domains); `--checkpoint final` keeps
each run's last checkpoint. The 22 single-target calls read the same file filtered to one domain each (what a
user without several targets had to do). Both are run in this process after a first call that compiles their
programs, so the times are of fitting, not of compiling; compile times are printed too. Nothing is asserted.

    python benchmarks/bench_read_fit.py [--resamples 100] [--restarts 8] [--domains 22] [--singles 22]

`--singles N` (N < domains) times only the first N single-target calls and prints the 22-call total as N's mean
times the number of domains, labelled extrapolated (on a shared machine, all 22 calls may not fit).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(os.environ.get("CAMEL_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "data" / "external"


def run(argv: list[str]) -> float:
    """Seconds of one `camel-jax fit` call in this process (its output swallowed; a failure raises)."""
    from camel_jax import cli

    start = time.perf_counter()
    argv = ["fit", *argv]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                code = cli.main(argv)
            except SystemExit as error:  # argparse
                code = error.code
    if code != 0:
        raise RuntimeError(f"camel-jax {' '.join(argv)} failed: {err.getvalue()[-300:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--domains", type=int, default=22, help="validation domains kept (22: all)")
    parser.add_argument("--singles", type=int, default=None,
                        help="single-target calls timed (default: one per domain); fewer are extrapolated")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("CAMEL_JAX_CACHE_DIR", "off")  # compile in-process, so that the compile is measured
    source = ROOT / "mixinglaws_ye2024" / "5Mix_long.csv"
    if not source.is_file():
        sys.exit(f"not found: {source} (set CAMEL_SHARED to the shared/ folder)")
    df = pd.read_csv(source)
    domains = list(dict.fromkeys(df["valid_domain"]))[: args.domains]
    df = df[df["valid_domain"].isin(domains)]
    common = ["--law", "camel-tied", "--n-domains", "2", "--checkpoint", "final", "--restarts", str(args.restarts),
              "--resamples", str(args.resamples)]  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "5Mix_long.csv"
        df.to_csv(table, index=False)
        out = str(Path(folder) / "fit")
        print(f"table: {len(df)} rows, {df.groupby(['run_id', 'model_size_label']).ngroups} runs, "
              f"{len(domains)} domains, {df['step'].nunique()} checkpoints; law camel-tied k=2, "
              f"{args.restarts} restarts, {args.resamples} resamples; {os.cpu_count()} cores")  # fmt: skip
        first = run([str(table), *common, "--out", out])
        together = run([str(table), *common, "--out", out])
        print(f"one call, {len(domains)} targets: {together:.1f} s after compile (first call {first:.1f} s)")
        singles = []
        timed = domains[: args.singles] if args.singles else domains
        for d, domain in enumerate(timed):
            one = Path(folder) / f"domain_{d}.csv"
            df[df["valid_domain"] == domain].to_csv(one, index=False)
            if d == 0:
                singles_first = run([str(one), *common, "--out", out])
            singles.append(run([str(one), *common, "--out", out]))
            print(f"  single-target call {d + 1}/{len(timed)} ({domain}): {singles[-1]:.1f} s", flush=True)
        each = sum(singles) / len(singles)
        total = each * len(domains)
        label = "measured" if len(singles) == len(domains) else f"EXTRAPOLATED from {len(singles)} measured calls"
        print(f"single-target calls: {each:.2f} s each after compile (first call {singles_first:.1f} s); "
              f"{len(domains)} calls: {total:.1f} s ({label})")  # fmt: skip
        ordered = sorted(singles)
        print(f"single-target calls after compile: min {ordered[0]:.1f} s, median {ordered[len(ordered) // 2]:.1f} s, "
              f"max {ordered[-1]:.1f} s (a fit's steps depend on its target: one hard target can be most of the sum)")
        print(f"ratio: the {len(domains)} single-target calls take {total / together:.2f}x the one call ({label})")


if __name__ == "__main__":
    main()
