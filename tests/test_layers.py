"""The house in layers: every module of camel_jax has a layer, imports only from its own layer or below, and no
imports go round in a circle. Imports are read with `ast`, function-level and `TYPE_CHECKING` ones included, since
a circle hidden inside a function is still a circle.

The folders are the layers: laws/ at the bottom, then solver/, data/, fitting/, mixture/, experiments/, and io/, plot/,
cli/ and the public namespaces at the edges."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "camel_jax"

BASE, SOLVER, DATA, FITTING, MIXTURE, EXPERIMENTS, EDGES = range(7)
LAYERS = {
    "laws": BASE,  # the laws, one file each, and the registry of their names
    "_version": BASE,
    "_deprecated": BASE,  # old names forwarded for one release (issue 33), used by every layer
    "_warn": BASE,  # warnings that name the caller's line, used by every layer
    "_progress": BASE,  # the one progress bar (bootstrap, law selection)
    "_lazy": BASE,  # the package's names imported on first use (`import camel_jax` imports no JAX)
    "solver": SOLVER,  # minimise: options and status codes, lanes, L-BFGS, the Newton finish, the implicit adjoint
    "fitting": FITTING,  # objective, fit, bootstrap, identifiability, calibration, influence
    "data": DATA,  # the reader of users' tables (read_runs), the containers, the checks of tables and designs
    "mixture": MIXTURE,  # the pipeline, the optimal mixture, the verdict, the next runs, their table front ends
    "experiments": EXPERIMENTS,  # designs, the extrapolation protocol, law selection, simulated worlds, backtests
    # the edges: the public namespaces, save/load, pictures, the command line and its demo
    "__init__": EDGES,
    "simulate": EDGES,
    "io": EDGES,
    "plot": EDGES,
    "_demo": EDGES,
    "cli": EDGES,
    "__main__": EDGES,
}


def _module(path: Path) -> str:
    """The dotted module name of a file under camel_jax ("fitting._fit"; a package's `__init__` is the package)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def _existing(parts: list[str]) -> str:
    """The longest prefix of `parts` that is a module or package of camel_jax ("__init__" for the package)."""
    for n in range(len(parts), 0, -1):
        candidate = PACKAGE.joinpath(*parts[:n])
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts[:n])
    return "__init__"


def _resolve(path: Path, node: ast.ImportFrom) -> list[str]:
    """The camel_jax modules an import statement in `path` reads, as dotted names."""
    package = list(path.relative_to(PACKAGE).parent.parts)
    if node.level:
        base = package[: len(package) - (node.level - 1)]
    elif (node.module or "").split(".")[0] == "camel_jax":
        base, node = [], ast.ImportFrom(module=".".join(node.module.split(".")[1:]) or None, names=node.names)
    else:
        return []
    if node.module:
        return [_existing(base + node.module.split("."))]
    return [_existing(base + [alias.name]) if base or alias.name != "__version__" else "__init__"
            for alias in node.names]  # fmt: skip


def _layer(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def imports() -> dict[str, set[str]]:
    """Module -> the camel_jax modules it imports (at any depth of the file: functions and TYPE_CHECKING too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module(path)
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                edges |= set(_resolve(path, node))
            elif isinstance(node, ast.Import):
                edges |= {_existing(a.name.split(".")[1:]) for a in node.names if a.name.split(".")[0] == "camel_jax"}
        edges.discard(name)
    return graph


def test_every_module_has_a_layer():
    top = {module.split(".")[0] for module in imports()}
    assert sorted(top - set(LAYERS)) == [], "new module or folder: give it a layer in LAYERS"
    assert sorted(set(LAYERS) - top) == [], "LAYERS names a module that does not exist"


def test_the_folders_are_the_layers():
    """Only the edges sit at the top: every private module of a lower layer lives in its layer's folder."""
    flat = sorted(p.name for p in PACKAGE.glob("_*.py") if p.stem not in LAYERS)
    assert flat == [], f"flat modules outside the layer folders: {flat}"


def test_no_module_imports_a_higher_layer():
    upward = [(m, t) for m, targets in imports().items() for t in targets if _layer(t) > _layer(m)]
    assert upward == [], f"imports from a higher layer: {upward}"


def test_no_import_circles():
    graph = imports()
    circles = []

    def visit(node, stack, done):
        for target in sorted(graph.get(node, ())):
            if target in stack:
                circles.append(stack[stack.index(target) :] + [target])
            elif target not in done:
                visit(target, stack + [target], done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(graph):
        if start not in done:
            visit(start, [start], done)
    assert circles == [], f"import circles: {circles}"


def test_the_check_sees_hidden_imports(tmp_path):
    source = "def f():\n    from ._fit import fit\n\nif TYPE_CHECKING:\n    from ._calibrate import Calibration\n"
    nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    found = sorted(t for n in nodes for t in _resolve(PACKAGE / "fitting" / "_identify.py", n))
    assert found == ["fitting._calibrate", "fitting._fit"]


def test_the_solver_imports_no_law_data_or_fitting_module():
    """Issue 58: the solver stands alone (`camel_jax.solver.minimise` takes a scalar function of a pytree); the
    laws, the data layer and fitting sit on either side of it, and it reads none of them."""
    graph = imports()
    reads = sorted((module, target) for module, targets in graph.items() if module.split(".")[0] == "solver"
                   for target in targets if target.split(".")[0] in ("laws", "data", "fitting"))  # fmt: skip
    assert reads == [], f"the solver imports a law, data or fitting module: {reads}"
    assert {"solver._minimise", "solver._lbfgs", "solver._newton", "solver._implicit"} <= set(graph)
