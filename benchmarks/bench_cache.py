"""Compile once: `camel-jax demo` run twice in fresh processes sharing a new persistent compilation cache (issue 12).

The first run compiles every program and stores it in the cache folder; the second reads them back, so what is
left is tracing, lowering and compute. Prints both wall times (whole process: imports included) and the ratio of
the second to the first (target <= 0.5). The cache folder is a fresh temporary one, removed at the end.

    python benchmarks/bench_cache.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_demo(cache: str, out: str, quick: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    env["CAMEL_JAX_CACHE_DIR"] = cache
    command = [sys.executable, "-m", "camel_jax.cli", "demo", "--out", out] + (["--quick"] if quick else [])
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the demo's quick mode")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="camel-jax-bench-cache-")
    try:
        cache, out = str(Path(folder) / "cache"), str(Path(folder) / "figures")
        first = run_demo(cache, out, args.quick)
        second = run_demo(cache, out, args.quick)
        entries = sum(1 for _ in Path(cache).iterdir())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"camel-jax demo{' --quick' if args.quick else ''}: first run {first:.1f} s (cold cache, {entries} programs "
        f"stored), second run {second:.1f} s: {second / first:.2f} of the first (target <= 0.50)"
    )


if __name__ == "__main__":
    main()
