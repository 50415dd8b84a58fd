"""The package's names, imported when first used (PEP 562), so that `import camel_jax` does not import JAX.

`camel_jax/__init__.py` lists every public name as an explicit `from .module import name as name` line inside an
`if TYPE_CHECKING:` block: type checkers and the docs read them there, and at run time `lazy_names` reads the same
lines (the one list) and imports a name's module on first access. The command line's `--help` and argument errors
so answer without JAX (0.06 s instead of 1 s).
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from typing import Any


def _table(init_file: str) -> dict[str, tuple[str, str | None]]:
    """{public name: (module, attribute or None for a module)} from the `if TYPE_CHECKING:` imports of the file."""
    with open(init_file, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    table: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            continue
        for line in node.body:
            if isinstance(line, ast.ImportFrom):
                module = "." * line.level + (line.module or "")
                for alias in line.names:
                    is_module = line.module is None  # `from . import simulate`
                    table[alias.asname or alias.name] = (
                        module + alias.name if is_module else module,
                        None if is_module else alias.name,
                    )
    return table


def lazy_names(
    package: str, init_file: str, namespace: dict[str, Any], renames: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__`: each name of its `TYPE_CHECKING` imports is imported on first
    access and kept in `namespace` (the package's globals: later accesses are plain lookups); each old name of
    `renames` ({old: new}) gives the new name's object with a `DeprecationWarning`."""
    table: dict[str, tuple[str, str | None]] = {}

    def __getattr__(name: str) -> Any:
        if not table:
            table.update(_table(init_file))
        if name in renames:
            from ._deprecated import warn_renamed

            warn_renamed(f"{package}.{name}", f"{package}.{renames[name]}")
            return __getattr__(renames[name])
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = table[name]
        value = importlib.import_module(module, package)
        if attribute is not None:
            value = getattr(value, attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        if not table:
            table.update(_table(init_file))
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
