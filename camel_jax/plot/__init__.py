"""`camel_jax.plot`: figures of fits, extrapolations, optimal mixtures and sampling designs (needs matplotlib)."""

import typing as _typing

from .._deprecated import renamed_attributes as _renamed_attributes
from ._plot import drawn as drawn
from ._plot import influence as influence
from ._plot import law_comparison as law_comparison
from ._plot import loss_vs_size as loss_vs_size
from ._plot import mixture_decision as mixture_decision
from ._plot import mixture_vs_size as mixture_vs_size
from ._plot import predicted_vs_observed as predicted_vs_observed
from ._plot import sampling_strategies as sampling_strategies
from ._plot import save_figure as save_figure
from ._plot import score_vs_size as score_vs_size
from ._plot import strategy_error as strategy_error

# Old names, deprecated (issue 33); hidden from mypy, which would otherwise accept any name of the module.
if not _typing.TYPE_CHECKING:
    __getattr__ = _renamed_attributes(__name__, globals(), {"objective_vs_size": "score_vs_size"})
