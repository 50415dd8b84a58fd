"""Old names that keep working for one release, each with a `DeprecationWarning` that names the new one.

Issue 33 gave "objective" one meaning, the fit objective; the weighted benchmark accuracy a mixture maximizes is
the *score*, and its weights are *benchmark weights*. The old names of the score's side are forwarded from here
(keywords), from the public namespaces (`__getattr__`) and from the methods themselves. Delete this module and its
uses in the next release.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ._warn import user_stacklevel

F = TypeVar("F", bound=Callable[..., Any])


def warn_renamed(old: str, new: str) -> None:
    """Warn that `old` is deprecated in favour of `new`, naming the caller's line (the first frame outside camel_jax:
    Python shows a `DeprecationWarning` by default only when that line is in `__main__`, so one named inside the
    package, as a fixed stacklevel did for `backtest`'s old-style method, was never shown)."""
    warnings.warn(f"{old} is deprecated: use {new} (the old name goes in the next release)", DeprecationWarning,
                  stacklevel=user_stacklevel())  # fmt: skip


def renamed_keywords(**renames: str) -> Callable[[F], F]:
    """A decorator: each old keyword of `renames` ({old: new}) is accepted with a warning and passed on as the new
    one; giving both is a `TypeError`. The function's signature and docstring are its own (`functools.wraps`)."""

    def decorate(function: F) -> F:
        positional = [p.name for p in inspect.signature(function).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip

        @functools.wraps(function)
        def forward(*args: Any, **kwargs: Any) -> Any:
            for old, new in renames.items():
                if old not in kwargs:
                    continue
                if new in kwargs or new in positional[: len(args)]:
                    raise TypeError(f"{function.__name__}() got both `{old}` and `{new}`: `{old}` is the deprecated "
                                    f"name of `{new}`; give `{new}` only")  # fmt: skip
                warn_renamed(f"{function.__name__}({old}=...)", f"{function.__name__}({new}=...)")
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return forward  # type: ignore[return-value]

    return decorate


def renamed_attributes(module: str, namespace: Mapping[str, Any], renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module's `__getattr__` for its old names ({old: new}, `new` a name in `namespace`, the module's globals,
    or the full dotted path of a name that moved to another module, "camel_jax.experiments.backtest"): each old
    name gives the new name's object, with a warning."""

    def __getattr__(name: str) -> Any:
        if name in renames and "." in renames[name]:
            where, _, attribute = renames[name].rpartition(".")
            warn_renamed(f"{module}.{name}", renames[name])
            return getattr(importlib.import_module(where), attribute)
        if name in renames:
            warn_renamed(f"{module}.{name}", f"{module}.{renames[name]}")
            return namespace[renames[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def keyword_only(*names: str) -> Callable[[F], F]:
    """A decorator for arguments that became keyword-only: positional values beyond the function's own positional
    parameters are passed on as `names`, in order, with a warning (`fit_arrays(law, inputs, y, weights)` ->
    `fit_arrays(law, inputs, y, weights=weights)`, issue 57). Giving one both ways is a `TypeError`."""

    def decorate(function: F) -> F:
        n_positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                           for p in inspect.signature(function).parameters.values())  # fmt: skip

        @functools.wraps(function)
        def forward(*args: Any, **kwargs: Any) -> Any:
            extra = args[n_positional:]
            if not extra:
                return function(*args, **kwargs)
            if len(extra) > len(names):
                raise TypeError(f"{function.__name__}() takes {n_positional} positional arguments; pass the rest by "
                                f"keyword ({', '.join(names)}, key=..., ...)")  # fmt: skip
            for name, value in zip(names, extra):
                if name in kwargs:
                    raise TypeError(f"{function.__name__}() got `{name}` both by position and by keyword")
                warn_renamed(f"{function.__name__}(..., {name}) by position", f"{function.__name__}(..., {name}=...)")
                kwargs[name] = value
            return function(*args[:n_positional], **kwargs)

        return forward  # type: ignore[return-value]

    return decorate
