"""`camel_jax.mixture`: the building blocks under `cj.fit_pipeline`, `cj.optimal_mixture`, `cj.decide` and
`cj.next_runs`. The loss-to-benchmark fits one by one, the ascent's options, the projection onto the capped
simplex, the optimal mixture along model size, the score's draws, each run's influence on the pick, the
derivative of an optimum, and the column names and option tables of the pipeline's tables.

The mixture layer holds the pipeline, the optimal mixture on the simplex, the verdict on the pick and the next
runs to train. It imports the fitting layer and below."""

from ..solver._implicit import implicit_mixture as implicit_mixture
from ._decide import VERDICTS as VERDICTS
from ._decide import score_draws as score_draws
from ._export import EXPORT_FORMATS as EXPORT_FORMATS
from ._loss_decision import SUPPORT_MARGIN as SUPPORT_MARGIN
from ._loss_decision import data_support as data_support
from ._loss_decision import loss_draws as loss_draws
from ._next import NEXT_COLUMNS as NEXT_COLUMNS
from ._next import variance_reduction as variance_reduction
from ._optimize import AscentOptions as AscentOptions
from ._optimize import mixture_derivative_status as mixture_derivative_status
from ._optimize import project_capped_simplex as project_capped_simplex
from ._pick_influence import PickInfluence as PickInfluence
from ._pick_influence import influence_text as influence_text
from ._pick_influence import pick_influence as pick_influence
from ._pipeline import BENCHMARK_OPTIONS as BENCHMARK_OPTIONS
from ._pipeline import PROXY_OPTIONS as PROXY_OPTIONS
from ._pipeline import BenchmarkFits as BenchmarkFits
from ._pipeline import fit_benchmark_laws as fit_benchmark_laws
from ._tables import mixture_path as mixture_path

# docs/api/mixture.md has one entry per name (tests/test_docs.py)
__all__ = [
    "fit_benchmark_laws",
    "BenchmarkFits",
    "BENCHMARK_OPTIONS",
    "PROXY_OPTIONS",
    "AscentOptions",
    "project_capped_simplex",
    "mixture_path",
    "mixture_derivative_status",
    "implicit_mixture",
    "pick_influence",
    "PickInfluence",
    "influence_text",
    "score_draws",
    "VERDICTS",
    "variance_reduction",
    "NEXT_COLUMNS",
    "EXPORT_FORMATS",
    "data_support",
    "loss_draws",
    "SUPPORT_MARGIN",
]
