import atexit
import os
import shutil
import tempfile

# One persistent compilation cache for the whole test run, shared by the xdist workers, the notebook kernels and
# the command-line subprocesses (they inherit the environment of the process that imports this first): the same
# small programs and fits recur across them, and a program compiled once is read back, not compiled again. It is
# a fresh folder, removed at exit, so nothing leaks between runs or into the user's cache; an existing
# JAX_COMPILATION_CACHE_DIR is respected, and CAMEL_TEST_COMPILE_CACHE=off turns the shared cache off.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ and os.environ.get("CAMEL_TEST_COMPILE_CACHE") != "off":
    _cache = tempfile.mkdtemp(prefix="camel-jax-test-compile-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"

import jax  # noqa: E402

# The command line's persistent compilation cache stays off in tests that call it in-process (one test turns it
# on in a subprocess): a test run must not write to the user's cache folder.
os.environ.setdefault("CAMEL_JAX_CACHE_DIR", "off")

# float64 for the whole session; float32 behaviour is tested with explicit dtypes. Strict promotion and raising
# rank promotion catch silent dtype changes and broadcasting.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
