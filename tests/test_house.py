"""The shape of the package: a pandas-free core, short functions, no global mutable state, one typed options
value, a traceable core, and the command line's compilation cache."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import known_tied_camel, random_mixtures

import camel_jax as cj

PACKAGE = Path(cj.__file__).parent
# Modules that must run without pandas (and without importing anything that imports it).
CORE = ["fitting._fit", "solver._lbfgs", "solver._newton", "fitting._bootstrap", "mixture._optimize",
        "mixture._pipeline", "fitting._identify", "solver._options", "data._checks", "laws._checks"]  # fmt: skip
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path) -> set[str]:
    """Every module `path` imports when it runs (function-level imports included, `if TYPE_CHECKING:` blocks
    left out), as package-relative names ("data._containers", "laws._base") or top-level names of other packages."""
    tree = ast.parse(path.read_text())
    skip = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add(node.module.split(".")[0])
                continue
            base = package[: len(package) - (node.level - 1)]
            target = [*base, *(node.module.split(".") if node.module else [])]
            names = [".".join(target)] if node.module else [".".join([*target, a.name]) for a in node.names]
            found |= {name.strip(".") for name in names}
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_the_core_never_imports_pandas():
    modules = _modules()
    graph = {name: _runtime_imports(path) for name, path in modules.items()}

    def reaches_pandas(name: str, seen: set[str]) -> list[str] | None:
        if name in seen:
            return None
        seen.add(name)
        for imported in sorted(graph.get(name, ())):
            if imported == "pandas":
                return [name, "pandas"]
            candidates = [imported, f"{imported}.__init__"] if imported in graph else [imported]
            for candidate in candidates:
                if candidate in graph:
                    path = reaches_pandas(candidate, seen)
                    if path:
                        return [name, *path]
        return None

    core = CORE + [name for name in modules if name.startswith("laws")]
    for name in core:
        chain = reaches_pandas(name, set())
        assert chain is None, f"{name} imports pandas through {' -> '.join(chain or [])}"
    # the check can fail: the data layer does import pandas
    assert reaches_pandas("data._containers", set()) == ["data._containers", "pandas"]


def test_no_function_is_longer_than_sixty_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # the docstring is the API reference (every parameter documented), not logic: it does not count
                body = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
                length = (node.end_lineno - node.lineno + 1) - (body[0].lineno - node.body[0].lineno)
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {length} lines")
    assert long == []


def test_no_global_mutable_state():
    """No `global` statement, and no function that stores into or mutates a module-level name."""
    mutators = {"append", "extend", "update", "clear", "pop", "setdefault", "add", "insert", "remove"}
    found = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        module_names = {
            target.id
            for node in tree.body
            if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            local = {a.arg for a in function.args.args + function.args.kwonlyargs}
            for node in ast.walk(function):
                if isinstance(node, ast.Global):
                    found.append(f"{name}.{function.name}: global {node.names}")
                stored = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AugAssign)
                    else []
                )
                for target in stored:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        if target.value.id in module_names - local:
                            found.append(f"{name}.{function.name}: stores into {target.value.id}")
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in module_names - local
                    and node.func.attr in mutators
                ):
                    found.append(f"{name}.{function.name}: {node.func.value.id}.{node.func.attr}()")
    assert found == []


def test_fit_options_are_checked_when_built_and_hashable():
    assert cj.FitOptions(max_steps=50) == cj.FitOptions(max_steps=50)
    assert hash(cj.FitOptions(max_steps=50)) == hash(cj.FitOptions(max_steps=50))
    assert cj.FitOptions().replace(tol=1e-8).tol == 1e-8
    assert cj.FitOptions().tolerance(jnp.float64) == 1e-7 and cj.FitOptions().tolerance(jnp.float32) == 1e-4
    for field, value, error in [
        ("max_steps", 0, ValueError),
        ("max_steps", 2.5, TypeError),
        ("polish", -1, ValueError),
        ("tol", 0.0, ValueError),
        ("delta", float("nan"), ValueError),
        ("reduction", "median", ValueError),
        ("log_residuals", 1, TypeError),
        ("prescreen", 0, ValueError),
        ("penalty", 3.0, TypeError),
    ]:
        with pytest.raises(error, match=f"`{field}`"):
            cj.FitOptions(**{field: value})
    with pytest.raises(TypeError, match="FitOptions"):
        cj.fit(cj.PowerLaw.sample_init(jax.random.key(0)), (jnp.ones(3),), jnp.ones(3), key=jax.random.key(0),
               options={"max_steps": 10})  # fmt: skip


def test_status_names_every_code_the_solvers_return():
    labels = ["running", "converged", "stalled", "non-finite", "max steps", "slow", "stuck"]
    assert [s.label for s in cj.Status] == labels
    assert cj.Status.STALLED.is_converged and not cj.Status.MAX_STEPS.is_converged and not cj.Status.SLOW.is_converged
    assert not cj.Status.STUCK.is_converged
    law = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
    x = jnp.linspace(1.0, 3.0, 8)
    result = cj.fit(law, (x,), law(x), key=jax.random.key(0), restarts=3, options=cj.FitOptions(max_steps=3, polish=0))
    assert {cj.Status(int(s)) for s in np.asarray(result.status)} == {cj.Status.MAX_STEPS}


def _tied_camel_datasets(n_sets: int):
    """`n_sets` datasets of the same shape from one true tied CAMEL law, each with its own mixtures."""
    true = known_tied_camel()
    rng = np.random.default_rng(3)
    M = jnp.asarray(np.repeat([4.0, 6.0, 8.0, 10.0, 12.0], 8))
    r = jnp.stack([jnp.asarray(random_mixtures(rng, 40, 3)) for _ in range(n_sets)])
    return true, r, M, jax.vmap(lambda ri: true(ri, M))(r)


def test_fit_arrays_runs_under_the_users_jit_and_vmap_over_datasets():
    true, r, M, y = _tied_camel_datasets(3)
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    options = cj.FitOptions(max_steps=2000)

    @jax.jit
    def fit_all(r, y, key):
        return jax.vmap(lambda ri, yi: cj.fit_arrays(template, (ri, M), yi, key=key, restarts=8, options=options))(r, y)

    batched = fit_all(r, y, jax.random.key(1))
    assert batched.objective.shape == (3,)
    for i in range(3):
        alone = cj.fit(template, (r[i], M), y[i], key=jax.random.key(1), restarts=8, options=options)
        np.testing.assert_allclose(batched.objective[i], alone.objective, rtol=1e-6, atol=1e-12)
        law_i = jax.tree.map(lambda leaf, i=i: leaf[i], batched.law)
        np.testing.assert_allclose(law_i(r[i], M), true(r[i], M), rtol=1e-5)


def test_fit_arrays_checks_values_inside_jit_with_error_if():
    law = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
    x = jnp.linspace(1.0, 3.0, 6)
    run = jax.jit(lambda y, w: cj.fit_arrays(law, (x,), y, w, key=jax.random.key(0), restarts=2).objective)
    assert np.isfinite(run(law(x), jnp.ones(6)))
    with pytest.raises(Exception, match="`weights` must be finite and >= 0"):
        jax.block_until_ready(run(law(x), jnp.ones(6).at[2].set(-1.0)))
    with pytest.raises(Exception, match="`y` must be finite"):
        jax.block_until_ready(run(law(x).at[0].set(-1.0), jnp.ones(6)))
    with pytest.raises(ValueError, match=r"`y` must have shape \(P,\) or \(T, P\) with P=6"):
        cj.fit_arrays(law, (x,), jnp.ones(5), key=jax.random.key(0))


@pytest.mark.parametrize("setting", ["folder", "off", "jax"])
def test_the_command_line_caches_compiled_programs(tmp_path, setting):
    folder = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}  # a user's own JAX cache
    if setting == "jax":  # JAX's own variable, set by the user, stays in force
        env["JAX_COMPILATION_CACHE_DIR"] = str(folder)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env.pop("CAMEL_JAX_CACHE_DIR", None)
    else:
        env["CAMEL_JAX_CACHE_DIR"] = str(folder) if setting == "folder" else "off"
    code = (
        "from camel_jax.cli import configure_jax; import jax; used = configure_jax(); "
        "jax.jit(lambda x: x * 2.0 + 1.0)(jax.numpy.ones(3)).block_until_ready(); print(used)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    if setting == "off":
        assert out.stdout.strip() == "None" and not folder.exists()
    else:
        assert out.stdout.strip() == str(folder) and any(folder.iterdir())
