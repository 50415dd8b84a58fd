import os

import jax
import pytest

# The command line's persistent compilation cache stays off in tests that call it in-process (one test turns it
# on in a subprocess): a test run must not write to the user's cache folder.
os.environ.setdefault("CAMEL_JAX_CACHE_DIR", "off")

# No persistent compilation cache in tests: sharing one between xdist workers measured no gain (203 s with it,
# 178 s without, on four notebooks and a CLI test), and a worker once aborted inside JAX's cache write. A user's own
# JAX_COMPILATION_CACHE_DIR is left as it is.

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


# The quick demo's tests, all in one module: under xdist they form one unit of work (below), so the demo runs once.
DEMO_TESTS = "tests/test_demo_figures.py::"


def pytest_xdist_make_scheduler(config, log):
    """`-n N --dist load`, except that test_demo_figures.py's tests go to one worker together: each worker that ran
    one of them would run the quick demo (a minute or two of compiling) for itself. Other modes are xdist's own.
    (xdist's own `--dist loadgroup` does not group under pytest 9: it renames items through an attribute pytest 9
    no longer reads.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class DemoOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return DEMO_TESTS if nodeid.startswith(DEMO_TESTS) else nodeid

    return DemoOnOneWorker(config, log)


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`camel-jax demo --quick`, run once per session (test_demo_figures.py): (its output folder, the numbers it
    returns)."""
    from camel_jax._demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(seed=0, out=str(out), quick=True)
