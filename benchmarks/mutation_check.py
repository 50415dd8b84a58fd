"""Mutation check: plant one-line bugs in a copy of the repository and confirm the tests that claim them fail.

Run before a release (minutes: each mutation runs its own tests in a fresh pytest process):

    python benchmarks/mutation_check.py            # every mutation, after a baseline run of the same tests
    python benchmarks/mutation_check.py --only prescreen-keeps-worst --no-baseline
    python benchmarks/mutation_check.py --list

Each mutation is (file, exact old snippet, new snippet, the CI tests that claim to catch it). The repository is
copied once to a temporary folder (this checkout is never modified); each mutation edits the copy, runs its tests
with `-m "not slow"` (a bug only a slow test catches is not caught in CI), and restores the file. A snippet that
is not found exactly once is reported STALE (the source moved: update the mutation), never as caught. A run in
which every claimed test was skipped (e.g. external data absent) is SKIPPED, not caught. The script prints a table
bug -> tests -> caught/missed and exits 1 if any mutation is missed, stale, skipped or errored.

The first six are the bugs issue 35 found getting past the suite; the rest are in code that matters.
External data (Epoch's Chinchilla table) comes from $CAMEL_SHARED, by default the `shared/` folder beside this
checkout, as for the tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    # --- the six of issue 35 -----------------------------------------------------------------------------------
    Mutation(
        "resampler-skips-last-unit-of-each-stratum",
        "camel_jax/fitting/_resample.py",
        "draws = jax.random.randint(k, (n_resamples, len(members)), 0, len(members))",
        "draws = jax.random.randint(k, (n_resamples, len(members)), 0, max(len(members) - 1, 1))",
        (
            "tests/test_bootstrap.py::test_point_resamples_are_multinomial_counts",
            "tests/test_bootstrap.py::test_every_unit_of_every_stratum_is_drawn_with_its_expected_count",
        ),
    ),
    Mutation(
        "prescreen-keeps-worst-starts",
        "camel_jax/fitting/_fit.py",
        "_, kept = jax.lax.top_k(-jnp.where(jnp.isfinite(values), values, jnp.inf), options.prescreen)",
        "_, kept = jax.lax.top_k(jnp.where(jnp.isfinite(values), values, -jnp.inf), options.prescreen)",
        ("tests/test_fit.py::test_inits_prescreen_and_result_fields",),
    ),
    Mutation(
        "cli-optimize-prints-uniform-mixture",
        "camel_jax/cli/optimize.py",
        "    r = np.atleast_2d(np.asarray(result.r)).mean(axis=0)\n",
        "    r = np.full(np.asarray(result.r).shape[-1], 1 / np.asarray(result.r).shape[-1])\n",
        ("tests/test_experience.py::test_cli_fit_then_optimize",),
    ),
    Mutation(
        "camel-data-tied-alpha-wrong",
        "camel_jax/laws/_camel_data.py",
        "            return 1.0 / (self.capacity_exponent + self.beta)\n",
        "            return 1.0 / self.capacity_exponent\n",
        ("tests/test_laws.py::test_matches_numpy_reference",),
    ),
    Mutation(
        "load-forces-log-residuals",
        "camel_jax/io/_save.py",
        'log_residuals=meta["log_residuals"],',
        "log_residuals=True,",
        ("tests/test_experience.py::test_save_load_round_trips_every_field_of_a_fit_with_non_default_options",),
    ),
    Mutation(
        "objective-uses-weights-as-mask",
        "camel_jax/fitting/_fit.py",
        "jnp.where(mask, weights * huber(",
        "jnp.where(mask, 1.0 * huber(",
        (
            "tests/test_fit.py::test_a_weight_of_k_is_the_point_k_times_in_the_objective_and_the_fit",
            "tests/test_bootstrap.py::test_each_resample_is_the_weighted_least_squares_fit_and_standard_errors_match_the_sandwich",
        ),
    ),
    # --- more, in code that matters ------------------------------------------------------------------------------
    Mutation(
        "resampler-counts-each-draw-twice",  # right mean and row sums, variance doubled
        "camel_jax/fitting/_resample.py",
        "draws = jax.random.randint(k, (n_resamples, len(members)), 0, len(members))",
        "draws = jnp.repeat(jax.random.randint(k, (n_resamples, len(members)), 0, len(members)), 2, axis=1)"
        "[:, : len(members)]",
        ("tests/test_bootstrap.py::test_point_resamples_are_multinomial_counts",),
    ),
    Mutation(
        "huber-linear-branch-offset",
        "camel_jax/fitting/_fit.py",
        "delta * (a - 0.5 * delta)",
        "delta * (a - delta)",
        ("tests/test_fit.py::test_huber_and_objective_by_hand",),
    ),
    Mutation(
        "objective-ignores-huber-delta",
        "camel_jax/fitting/_fit.py",
        "huber(jnp.where(mask, res, 0.0), options.delta)",
        "huber(jnp.where(mask, res, 0.0), 1e-3)",
        ("tests/test_fit.py::test_huber_and_objective_by_hand",),
    ),
    Mutation(
        "camel-profiles-softmax-over-datasets",
        "camel_jax/laws/_camel.py",
        "return simplex_from_roots(self.t_roots, axis=-2)",
        "return simplex_from_roots(self.t_roots, axis=-1)",
        ("tests/test_laws.py::test_matches_numpy_reference",),
    ),
    Mutation(
        "tied-alpha-drops-denominator",
        "camel_jax/laws/_camel.py",
        "            return 1.0 / (self.capacity_exponent + self.beta)\n",
        "            return 1.0 / (self.capacity_exponent + 0.0 * self.beta)\n",
        ("tests/test_laws.py::test_matches_numpy_reference",),
    ),
    Mutation(
        "camel-ignores-size-scale",
        "camel_jax/laws/_camel.py",
        "log_size = jnp.log(size / self.size_scale)",
        "log_size = jnp.log(size)",
        ("tests/test_laws.py::test_matches_numpy_reference",),
    ),
    Mutation(
        "chinchilla-data-term-on-model-size",
        "camel_jax/laws/_chinchilla.py",
        "self.log_B - beta * jnp.log(tokens / self.tokens_scale),",
        "self.log_B - beta * jnp.log(size / self.tokens_scale),",
        ("tests/test_laws.py::test_matches_numpy_reference",),
    ),
    Mutation(
        "flops-2nd-not-6nd",
        "camel_jax/experiments/_design.py",
        "return 6.0 * np.asarray(active_params, dtype=float) * np.asarray(tokens, dtype=float)",
        "return 2.0 * np.asarray(active_params, dtype=float) * np.asarray(tokens, dtype=float)",
        ("tests/test_design.py::test_flops_is_six_n_d",),
    ),
    Mutation(
        "interval-at-the-wrong-percentiles",
        "camel_jax/fitting/_bootstrap.py",
        "q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])",
        "q = 100 * np.array([1 - level, level])",
        ("tests/test_bootstrap.py::test_bootstrap_is_deterministic_chunk_invariant_and_gives_intervals",),
    ),
    Mutation(
        "verdict-swapped",
        "camel_jax/mixture/_decide.py",
        "verdict=VERDICTS[1] if reason else VERDICTS[0],",
        "verdict=VERDICTS[0] if reason else VERDICTS[1],",
        ("tests/test_calibrate.py::test_optimal_mixture_gives_the_verdict_for_a_reference",),
    ),
    Mutation(
        "influence-hessian-band-10x",
        "camel_jax/fitting/_influence.py",
        "share = jnp.where((jnp.abs(r) <= options.delta) & (weights > 0), weights, 0.0)",
        "share = jnp.where((jnp.abs(r) <= 10 * options.delta) & (weights > 0), weights, 0.0)",
        ("tests/test_influence.py::test_leave_one_out_values_match_exact_refits_with_the_band_at_the_noise_scale",),
    ),
]


def copy_repo(dst: Path) -> None:
    """The working tree as it is (uncommitted edits included), without caches, virtual environments or .git."""
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
                                    "*.egg-info", "camel-demo", "build", "dist", ".ipynb_checkpoints")  # fmt: skip
    shutil.copytree(ROOT, dst, ignore=ignore)


def run_tests(repo: Path, tests: tuple[str, ...], env: dict[str, str], timeout: float) -> tuple[str, str, float]:
    """Run `tests` in `repo`: (outcome, pytest's last line, seconds). Outcome: failed, passed, skipped, error,
    timeout."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", "-o", "addopts=",
           *tests]  # fmt: skip
    if _has_xdist():
        cmd[3:3] = ["-n", "0"]
    start = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", f"no result in {timeout:.0f} s", time.perf_counter() - start
    seconds = time.perf_counter() - start
    lines = [line for line in out.stdout.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else out.stderr.strip()[-200:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error|errors|deselected)", last)}
    if out.returncode == 1 and (counts.get("failed") or counts.get("error") or counts.get("errors")):
        return "failed", last, seconds
    if out.returncode == 0 and counts.get("passed"):
        return "passed", last, seconds
    if out.returncode in (0, 5) and not counts.get("passed"):
        return "skipped", last, seconds
    return "error", last + "\n" + out.stderr.strip()[-1500:], seconds


def _has_xdist() -> bool:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="run only these mutations (repeatable)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the claimed tests")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per pytest run (default 1200)")
    args = parser.parse_args(argv)
    mutations = list(MUTATIONS)
    if args.only:
        unknown = set(args.only) - {m.name for m in mutations}
        if unknown:
            parser.error(f"unknown mutation(s) {sorted(unknown)}; --list shows them")
        mutations = [m for m in mutations if m.name in args.only]
    if args.list:
        for m in mutations:
            print(f"{m.name:42s} {m.file}  -> {', '.join(m.tests)}")
        return 0
    env = dict(os.environ)
    env.setdefault("CAMEL_SHARED", str(ROOT.parent / "shared"))
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="camel-mutants-") as tmp:
        repo = Path(tmp) / "repo"
        copy_repo(repo)
        env["PYTHONPATH"] = str(repo)  # the copy's camel_jax wins over any installed one
        env["JAX_COMPILATION_CACHE_DIR"] = str(Path(tmp) / "jax-cache")  # shared by the runs: unchanged programs
        env["CAMEL_JAX_CACHE_DIR"] = "off"
        rows = []
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in mutations for t in m.tests))
            print(f"baseline: {len(tests)} tests on the unmutated copy ...", flush=True)
            outcome, last, seconds = run_tests(repo, tests, env, args.timeout)
            print(f"  {outcome} in {seconds:.0f} s: {last}", flush=True)
            if outcome != "passed":
                print("the claimed tests do not pass on the unmutated copy: no mutation result would mean anything")
                return 1
        for m in mutations:
            path = repo / m.file
            source = path.read_text() if path.is_file() else ""
            found = source.count(m.old)
            if found != 1:
                where = "not found" if found == 0 else f"found {found} times"
                print(
                    f"!!! STALE: {m.name}: the snippet is {where} in {m.file}; the source moved, update it", flush=True
                )
                rows.append((m, "STALE", f"snippet {where}", 0.0))
                continue
            path.write_text(source.replace(m.old, m.new))
            try:
                print(f"{m.name}: running {len(m.tests)} test(s) ...", flush=True)
                outcome, last, seconds = run_tests(repo, m.tests, env, args.timeout)
            finally:
                path.write_text(source)
            verdict = {"failed": "caught", "passed": "MISSED", "skipped": "SKIPPED", "timeout": "caught (timeout)"}
            rows.append((m, verdict.get(outcome, "ERROR"), last, seconds))
            print(f"  {verdict.get(outcome, 'ERROR')} in {seconds:.0f} s: {last}", flush=True)
    print()
    print(f"{'bug':42s} {'result':17s} {'s':>5s}  tests")
    for m, verdict, _, seconds in rows:
        tests = ", ".join(t.split("::")[-1] if "::" in t else t for t in m.tests)
        print(f"{m.name:42s} {verdict:17s} {seconds:5.0f}  {tests}")
    bad = [m.name for m, verdict, _, _ in rows if not verdict.startswith("caught")]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} planted bugs caught" + (f"; not caught: {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
