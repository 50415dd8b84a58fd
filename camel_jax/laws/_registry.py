"""One name for one law: the registry the command line, `backtest`, `observed_backtest`, `select_law`'s callers and
the saved files' reports share, so that "camel" means the same law everywhere.

A name fixes the law's class and its form (tied or free exponents, tokens or not); the sizes of the problem
(`n_datasets`, `n_domains`), its hyperparameters (`capacity_exponent`) and its reference scales are the caller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from jaxtyping import Array

from ._base import AbstractLaw
from ._camel import CAMEL
from ._camel_data import CAMELData
from ._camel_mixture import CAMELMixture
from ._chinchilla import Chinchilla
from ._dml import DML
from ._log_linear import LogLinear
from ._power_law import PowerLaw
from ._sodm_additive import SODMAdditive
from ._sodm_joint import SODMJoint


@dataclasses.dataclass(frozen=True)
class LawEntry:
    """A registered law: its class, the form the name fixes, and the inputs it reads.

    - `cls`, `form`: `law_template(name, ...)` is `cls.sample_init(key, **form, **the caller's options it takes)`.
    - `takes`: the options of `sample_init` the caller may set (the rest are the class's defaults).
    - `mixture`, `size`: whether the law reads a mixture and a model size; `tokens`: "never", "optional" (a
      tokens input when the table has one) or "required".
    """

    name: str
    cls: type[AbstractLaw]
    form: Mapping[str, Any]
    takes: tuple[str, ...]
    mixture: bool
    size: bool
    tokens: str


_MIXTURE_OPTIONS = ("n_datasets", "n_domains", "capacity_exponent", "size_scale")
# CAMELData's own: its tokens input, and the bounds of its exponents (`UPPER_BOUNDS`)
_DATA_OPTIONS = ("tokens", "tokens_scale", "beta_max", "gamma_max")


def _entries() -> dict[str, LawEntry]:
    entries = [
        LawEntry("camel-tied", CAMEL, {"tied": True}, (*_MIXTURE_OPTIONS, "beta_max"), True, True, "never"),
        LawEntry("camel-free", CAMEL, {"tied": False}, (*_MIXTURE_OPTIONS, "beta_max"), True, True, "never"),
        LawEntry("camel-data-tied", CAMELData, {"tied": True}, (*_MIXTURE_OPTIONS, *_DATA_OPTIONS), True, True,
                 "optional"),
        LawEntry("camel-data-free", CAMELData, {"tied": False}, (*_MIXTURE_OPTIONS, *_DATA_OPTIONS), True, True,
                 "optional"),
        LawEntry("sodm-additive", SODMAdditive, {}, ("n_datasets", "tokens", "size_scale", "tokens_scale"), True,
                 True, "optional"),
        LawEntry("sodm-joint", SODMJoint, {}, ("n_datasets", "tokens", "size_scale", "tokens_scale"), True, True,
                 "optional"),
        LawEntry("camel-mixture", CAMELMixture, {}, ("n_datasets", "n_domains", "alpha_max", "a_max"), True, False,
                 "never"),
        LawEntry("dml", DML, {}, ("n_datasets", "n_domains"), True, False, "never"),
        LawEntry("chinchilla", Chinchilla, {}, ("size_scale", "tokens_scale"), False, True, "required"),
        LawEntry("power", PowerLaw, {}, ("size_scale",), False, True, "never"),
        LawEntry("log-linear", LogLinear, {"size": False, "tokens": False}, ("n_datasets",), True, False, "never"),
        LawEntry("log-linear-size", LogLinear, {"size": True}, ("n_datasets", "tokens", "size_scale",
                 "tokens_scale"), True, True, "optional"),
    ]  # fmt: skip
    return {entry.name: entry for entry in entries}


LAWS: Mapping[str, LawEntry] = MappingProxyType(_entries())
# Short names, each meaning one registered law wherever a law is named.
ALIASES: Mapping[str, str] = MappingProxyType({"camel": "camel-tied", "camel-data": "camel-data-tied",
                                               "sodm": "sodm-additive"})  # fmt: skip
LAW_NAMES = tuple(LAWS) + tuple(ALIASES)


def law_entry(name: str) -> LawEntry:
    """The registered law a name (or alias) means; a ValueError listing the names otherwise."""
    if not isinstance(name, str) or ALIASES.get(name, name) not in LAWS:
        raise ValueError(f"unknown law {name!r}; the registered names are {', '.join(LAW_NAMES)}")
    return LAWS[ALIASES.get(name, name)]


def law_template(name: str, key: Array, **options: Any) -> AbstractLaw:
    """A starting law of the registered kind `name`, drawn with `key`.

    **Arguments**:

    - `name`: a registered name or alias (`LAW_NAMES`), e.g. `"camel-tied"` or `"sodm-additive"`.
    - `key`: a `jax.random` key for the start.
    - `options`: `sample_init` options; those the law does not take (`LawEntry.takes`) are ignored, so one call
      serves every law (e.g. `n_domains` for SODM). PowerLaw's scale is `size_scale`.

    **Returns**: the law (a template for `fit`, whose units `fit` sets from the data).
    """
    entry = law_entry(name)
    chosen: dict[str, Any] = {k: v for k, v in options.items() if k in entry.takes}
    if entry.cls is PowerLaw and "size_scale" in chosen:
        chosen["scale"] = chosen.pop("size_scale")
    return entry.cls.sample_init(key, **entry.form, **chosen)


def law_name(law: Any) -> str | None:
    """The registered name of a law instance (None for a class the registry does not know)."""
    structure = law.structure() if hasattr(law, "structure") else {}
    for entry in LAWS.values():
        if type(law) is entry.cls and all(structure.get(k, v) == v for k, v in entry.form.items()):
            return entry.name
    return None
