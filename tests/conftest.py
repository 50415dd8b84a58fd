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


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`camel-jax demo --quick`, run once per session: (its output folder, the numbers it returns)."""
    from camel_jax._demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(seed=0, out=str(out), quick=True)
