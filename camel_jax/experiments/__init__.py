"""`camel_jax.experiments`: the tools that test the method rather than use it. Designs under a FLOPs budget
(`sample_design`, `allocate`, `perturbed_mixtures`), the paper's extrapolation protocol (`extrapolation_error`,
`compare_laws`, `select_domains`), law selection by held-out error (`select_law`), and backtests of the pick on
simulated worlds (`backtest`) and on real tables (`backtest_observed`), with the column names of their tables.

The experiments layer imports the mixture layer and below; nothing below imports it."""

from ._backtest import ADAPTIVE as ADAPTIVE
from ._backtest import BACKTEST_COLUMNS as BACKTEST_COLUMNS
from ._backtest import BACKTEST_METHODS as BACKTEST_METHODS
from ._backtest import BACKTEST_STRATEGIES as BACKTEST_STRATEGIES
from ._backtest import AdaptiveOptions as AdaptiveOptions
from ._backtest import backtest as backtest
from ._design import STRATEGIES as STRATEGIES
from ._design import allocate as allocate
from ._design import flops as flops
from ._design import perturbed_mixtures as perturbed_mixtures
from ._design import sample_design as sample_design
from ._evaluate import DMLNested as DMLNested
from ._evaluate import compare_laws as compare_laws
from ._evaluate import extrapolation_error as extrapolation_error
from ._evaluate import heldout_benchmark_error as heldout_benchmark_error
from ._evaluate import select_domains as select_domains
from ._evaluate import training_masks as training_masks
from ._observed import OBSERVED_COLUMNS as OBSERVED_COLUMNS
from ._observed import OBSERVED_METHODS as OBSERVED_METHODS
from ._observed import backtest_observed as backtest_observed
from ._observed import spearman as spearman
from ._select import SELECT_COLUMNS as SELECT_COLUMNS
from ._select import select_law as select_law

# docs/api/experiments.md has one entry per name (tests/test_docs.py)
__all__ = [
    # designs
    "flops",
    "perturbed_mixtures",
    "allocate",
    "sample_design",
    "STRATEGIES",
    # the extrapolation protocol and law selection
    "extrapolation_error",
    "compare_laws",
    "select_domains",
    "training_masks",
    "heldout_benchmark_error",
    "DMLNested",
    "select_law",
    "SELECT_COLUMNS",
    # backtests on simulated worlds and on real tables
    "backtest",
    "BACKTEST_METHODS",
    "BACKTEST_STRATEGIES",
    "BACKTEST_COLUMNS",
    "ADAPTIVE",
    "AdaptiveOptions",
    "backtest_observed",
    "OBSERVED_METHODS",
    "OBSERVED_COLUMNS",
    "spearman",
]
