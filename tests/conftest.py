import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import pytest

# Compile time is most of this suite's time on a CPU. XLA's CPU backend compiles this project's programs with its
# older fusion emitters in ~40% less CPU time, with the same run time and results (measured on the fit program of
# tied CAMEL k=3 on the paper's design, 2 cores: 7.1 -> 3.9 CPU-seconds; 512 starts run 8.9 vs 7.9 CPU-seconds; the
# same objective to the last digit). Set once here, before JAX starts its backend, and inherited by the xdist
# workers, notebook kernels and command-line subprocesses. An unknown flag aborts XLA, so a flag is set only when a
# probe process accepts it (a future jaxlib may drop it), and never over a flag of the same name the user set.
FAST_COMPILE = "--xla_cpu_use_fusion_emitters=false"
# The default suite's tests compile many small programs and run each briefly (its long-running studies are marked
# slow: `make test-all`). Without LLVM's optimization of the generated code (backend optimization level 0) the fit
# program above compiles in 2.3 s instead of 6.9 s and runs in 1.30 s instead of 0.37 s, with the same objective to
# 1e-14 relative; whole modules measured: test_fit 204 -> 104 s, test_implicit 120 -> 35 s (but the run-bound
# test_backtest 246 -> 381 s and notebook 08 178 -> 241 s). So every xdist worker (`-n 2`, what `make test` runs)
# compiles so, and so do the notebook kernels they start, but for two notebooks that run long programs
# (`test_notebooks.RUN_BOUND`: the flag is dropped from their environment). Every default test passes at either
# level; one slow test needs the optimization (tied CAMEL's anchor test in test_convergence: at level 0 a start of
# one world ends at the step cap).
# A user's programs, `make test-all` and a run without xdist keep XLA's defaults but for FAST_COMPILE.
UNOPTIMIZED = "--xla_backend_optimization_level=0"


def _with_flags(flags: str, wanted: list[str]) -> str:
    """`flags` plus each of `wanted` whose name the user's flags do not already set, when a probe process accepts
    them all (else `flags` unchanged)."""
    missing = [flag for flag in wanted if flag.split("=")[0] not in flags]
    if not missing:
        return flags
    candidate = " ".join([flags, *missing]).strip()
    probe = [sys.executable, "-c", "import jax; jax.devices('cpu')"]
    try:
        accepted = subprocess.run(probe, env={**os.environ, "XLA_FLAGS": candidate}, capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return flags
    return candidate if accepted.returncode == 0 else flags


def _fast_compile() -> None:
    wanted = [FAST_COMPILE]
    if os.environ.get("PYTEST_XDIST_WORKER"):  # set by xdist before this file is imported
        wanted.append(UNOPTIMIZED)
    os.environ["XLA_FLAGS"] = _with_flags(os.environ.get("XLA_FLAGS", ""), wanted)


def optimized_flags() -> str:
    """This process's XLA_FLAGS without UNOPTIMIZED: for subprocesses that run long programs (notebook kernels)."""
    return " ".join(flag for flag in os.environ.get("XLA_FLAGS", "").split() if flag != UNOPTIMIZED)


_fast_compile()

# The command line's persistent compilation cache stays off in tests that call it in-process (one test turns it
# on in a subprocess): a test run must not write to the user's cache folder.
os.environ.setdefault("CAMEL_JAX_CACHE_DIR", "off")

# A persistent compilation cache per test process, fresh for each run: a module's programs are dropped after the
# module (below), and the next module, notebook kernel or command-line subprocess of the same worker that needs the
# same program reads it back instead of compiling it again (the clean-clone suite: 35 -> 24 minutes together with
# the units of work below). One folder per xdist worker, so that no two processes write one folder at once; it is
# removed when the worker ends. A user's own JAX_COMPILATION_CACHE_DIR is left as it is.
TEST_CACHE: Path | None = None


def pytest_configure(config):
    global TEST_CACHE
    controller = not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))
    if controller or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    worker = config.workerinput["workerid"] if hasattr(config, "workerinput") else "main"
    TEST_CACHE = Path(tempfile.mkdtemp(prefix=f"camel-jax-tests-{worker}-"))
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(TEST_CACHE)  # notebook kernels and subprocesses inherit it
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"
    jax.config.update("jax_compilation_cache_dir", str(TEST_CACHE))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)


def pytest_unconfigure(config):
    if TEST_CACHE is not None:
        shutil.rmtree(TEST_CACHE, ignore_errors=True)


# float64 for the whole session; float32 behaviour is tested with explicit dtypes. Strict promotion and raising
# rank promotion catch silent dtype changes and broadcasting.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module: modules rarely share programs, and an xdist worker that
    kept every module's programs grew past 5 GB and twice aborted inside XLA's compiler late in a run."""
    yield
    jax.clear_caches()


# Units of work under xdist: a test module goes to one worker whole, so that its module-scoped fixtures are built
# once and its compiled programs serve all its tests (the quick demo's tests share one demo run); each notebook is
# its own unit. The heaviest units are handed out first, so that no worker is left alone with one at the end.
NOTEBOOKS = "tests/test_notebooks.py::test_notebook_asserts_its_results["
HEAVY_FIRST = [
    NOTEBOOKS + "09_", NOTEBOOKS + "03_", NOTEBOOKS + "05_", NOTEBOOKS + "04_", NOTEBOOKS + "01_", NOTEBOOKS + "08_",
    NOTEBOOKS + "07_",
    "tests/test_bad_input.py", "tests/test_fit.py", "tests/test_convergence.py", "tests/test_laws.py",
    "tests/test_mixture_gradient.py", "tests/test_calibrate.py", "tests/test_loss_decision.py",
    "tests/test_implicit.py", "tests/test_influence.py", "tests/test_loop.py", "tests/test_read.py",
    "tests/test_identify.py", "tests/test_devices.py",
]  # fmt: skip


def _unit(nodeid: str) -> str:
    return nodeid if nodeid.startswith(NOTEBOOKS) else nodeid.split("::")[0]


def _rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(HEAVY_FIRST) if nodeid.startswith(prefix)), len(HEAVY_FIRST))


def pytest_collection_modifyitems(config, items):
    """Heaviest units first (a stable sort: the order within a unit is kept). Every worker sorts alike."""
    items.sort(key=lambda item: _rank(item.nodeid))


def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist load`, with the units above (xdist's `--dist loadfile` would put all notebooks in one unit, and
    its own `loadgroup` does not group under pytest 9: it renames items through an attribute pytest 9 no longer
    reads). Other modes are xdist's own."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep the order above, not xdist's "most tests first"

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return ByUnit(config, log)


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`camel-jax demo --quick`, run once per session (test_demo_figures.py): (its output folder, the numbers it
    returns)."""
    from camel_jax._demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(seed=0, out=str(out), quick=True)
