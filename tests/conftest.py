import os
import shutil
import tempfile

import jax
import pytest

# The command line's persistent compilation cache stays off in tests that call it in-process (one test turns it
# on in a subprocess): a test run must not write to the user's cache folder.
os.environ.setdefault("CAMEL_JAX_CACHE_DIR", "off")

# One JAX compilation cache per test run, in a fresh temporary folder shared by the xdist workers and the notebook
# kernels (both inherit the environment of the process that made it): a program one process compiled, another
# reads back. A user's own JAX_COMPILATION_CACHE_DIR is left as it is; the run's own folder is removed at the end.
_OWNED = None
if not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    _OWNED = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="camel-jax-tests-")
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])

# float64 for the whole session; float32 behaviour is tested with explicit dtypes. Strict promotion and raising
# rank promotion catch silent dtype changes and broadcasting.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_unconfigure(config):
    """The process that made the run's cache folder removes it."""
    if _OWNED is not None:
        shutil.rmtree(_OWNED, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_quick(tmp_path_factory):
    """`camel-jax demo --quick`, run once per session: (its output folder, the numbers it returns)."""
    from camel_jax._demo import run_demo

    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(seed=0, out=str(out), quick=True)
