"""The house in layers: every module of camel_jax has a layer, imports only from its own layer or below, and no
imports go round in a circle. Imports are read with `ast`, function-level and `TYPE_CHECKING` ones included, since
a circle hidden inside a function is still a circle.

The intended folders (not moved yet: every layer is being edited in parallel) follow this table: laws/ and the
data containers at the bottom, then solver/, fitting/, mixture/, experiments/, and io/, plot/, cli/ at the edges."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "camel_jax"

BASE, SOLVER, FITTING, MIXTURE, EXPERIMENTS, EDGES = range(6)
LAYERS = {
    # the laws, the options and result codes, and the data containers (which import nothing of ours)
    "laws": BASE,
    "_options": BASE,
    "_io": BASE,
    "_design": BASE,
    "_resample": BASE,
    # the solver and the checks every entry point runs
    "_checks": SOLVER,
    "_lbfgs": SOLVER,
    "_newton": SOLVER,
    "_residuals": SOLVER,
    "_implicit": SOLVER,
    # fitting: objective, fit, bootstrap, identifiability, calibration
    "_identify": FITTING,
    "_fit": FITTING,
    "_calibrate": FITTING,
    "_bootstrap": FITTING,
    "_influence": FITTING,
    # mixture: the pipeline, the optimal mixture, the verdict, the next runs, their table front ends
    "_pipeline": MIXTURE,
    "_decide": MIXTURE,
    "_optimize": MIXTURE,
    "_next": MIXTURE,
    "_tables": MIXTURE,
    "_pick_influence": MIXTURE,
    # experiments: simulated worlds, the extrapolation protocol, law selection, backtests
    "_simulate": EXPERIMENTS,
    "simulate": EXPERIMENTS,
    "_evaluate": EXPERIMENTS,
    "_select": EXPERIMENTS,
    "_observed": EXPERIMENTS,
    "_backtest": EXPERIMENTS,
    # the edges: the public namespace, save/load, pictures, the command line and its demo
    "__init__": EDGES,
    "_save": EDGES,
    "_plot": EDGES,
    "plot": EDGES,
    "_demo": EDGES,
    "cli": EDGES,
    "__main__": EDGES,
}
# `_save` reads `__version__` from the package that imports it (harmless: `__version__` is set before any import);
# the fix is a `_version.py` below both, in `_save`'s own change.
KNOWN_CIRCLES = {("_save", "__init__")}


def _name(path: Path) -> str:
    """The module's key in LAYERS: top-level modules by name, every file of a subpackage by the subpackage."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0] if len(parts) > 1 else parts[0]


def _resolve(path: Path, node: ast.ImportFrom) -> list[str]:
    """The camel_jax modules an import statement in `path` reads, as LAYERS keys."""
    package = path.relative_to(PACKAGE).parent.parts
    if node.level:
        base = list(package[: len(package) - (node.level - 1)])
    elif (node.module or "").split(".")[0] == "camel_jax":
        base, node = [], ast.ImportFrom(module=".".join(node.module.split(".")[1:]) or None, names=node.names)
    else:
        return []
    if node.module:
        target = base + node.module.split(".")
        return [target[0] if target else "__init__"]
    if base:  # `from . import x` inside a subpackage: the subpackage itself
        return [base[0]]
    out = []
    for alias in node.names:  # `from . import simulate` is a module; `from . import __version__` the package
        exists = (PACKAGE / f"{alias.name}.py").exists() or (PACKAGE / alias.name).is_dir()
        out.append(alias.name if exists else "__init__")
    return out


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _name(path)
        edges = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                edges |= set(_resolve(path, node))
            elif isinstance(node, ast.Import):
                edges |= {a.name.split(".")[1] if "." in a.name else "__init__" for a in node.names
                          if a.name.split(".")[0] == "camel_jax"}  # fmt: skip
        edges.discard(name)
    return graph


def test_every_module_has_a_layer():
    graph = imports()
    assert sorted(set(graph) - set(LAYERS)) == [], "new module: give it a layer in LAYERS"
    assert sorted(set(LAYERS) - set(graph)) == [], "LAYERS names a module that does not exist"


def test_no_module_imports_a_higher_layer():
    upward = [(m, t) for m, targets in imports().items() for t in targets if LAYERS[t] > LAYERS[m]]
    assert upward == [], f"imports from a higher layer: {upward}"


def test_no_import_circles():
    graph = imports()
    for a, b in KNOWN_CIRCLES:
        graph[a] = graph[a] - {b}
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
    assert sorted(t for n in nodes for t in _resolve(PACKAGE / "_identify.py", n)) == ["_calibrate", "_fit"]
