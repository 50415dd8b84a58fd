"""`camel_jax.plot`: figures of fits, extrapolations, optimal mixtures and sampling designs (needs matplotlib)."""

from ._plot import drawn as drawn
from ._plot import influence as influence
from ._plot import law_comparison as law_comparison
from ._plot import loss_vs_size as loss_vs_size
from ._plot import mixture_decision as mixture_decision
from ._plot import mixture_vs_size as mixture_vs_size
from ._plot import objective_vs_size as objective_vs_size
from ._plot import predicted_vs_observed as predicted_vs_observed
from ._plot import sampling_strategies as sampling_strategies
from ._plot import save_figure as save_figure
from ._plot import strategy_error as strategy_error
