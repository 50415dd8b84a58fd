"""camel-jax: data-mixture scaling laws in JAX (CAMEL, DML, SODM, Chinchilla, loss-to-benchmark)."""

__version__ = "0.1.0"

from . import simulate as simulate
from ._backtest import ADAPTIVE as ADAPTIVE
from ._backtest import BACKTEST_COLUMNS as BACKTEST_COLUMNS
from ._backtest import BACKTEST_METHODS as BACKTEST_METHODS
from ._backtest import BACKTEST_STRATEGIES as BACKTEST_STRATEGIES
from ._backtest import backtest as backtest
from ._bootstrap import BootstrapResult as BootstrapResult
from ._bootstrap import bootstrap as bootstrap
from ._calibrate import Calibration as Calibration
from ._calibrate import calibrate as calibrate
from ._decide import VERDICTS as VERDICTS
from ._decide import Decision as Decision
from ._decide import decide as decide
from ._decide import objective_draws as objective_draws
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
from ._fit import FitResult as FitResult
from ._fit import data_template as data_template
from ._fit import fit as fit
from ._fit import fit_arrays as fit_arrays
from ._fit import huber as huber
from ._fit import objective as objective
from ._implicit import DerivativeStatus as DerivativeStatus
from ._implicit import implicit_mixture as implicit_mixture
from ._implicit import implicit_solution as implicit_solution
from ._influence import Influence as Influence
from ._influence import fit_derivative_status as fit_derivative_status
from ._influence import influence as influence
from ._io import BenchmarkData as BenchmarkData
from ._io import MixtureData as MixtureData
from ._next import NEXT_COLUMNS as NEXT_COLUMNS
from ._next import next_runs as next_runs
from ._next import variance_reduction as variance_reduction
from ._observed import OBSERVED_COLUMNS as OBSERVED_COLUMNS
from ._observed import OBSERVED_METHODS as OBSERVED_METHODS
from ._observed import backtest_observed as backtest_observed
from ._observed import spearman as spearman
from ._optimize import MixtureResult as MixtureResult
from ._optimize import mixture_derivative_status as mixture_derivative_status
from ._optimize import optimal_mixture as optimal_mixture
from ._optimize import project_capped_simplex as project_capped_simplex
from ._options import FitOptions as FitOptions
from ._options import Status as Status
from ._pick_influence import PickInfluence as PickInfluence
from ._pick_influence import influence_text as influence_text
from ._pick_influence import pick_influence as pick_influence
from ._pipeline import BENCHMARK_OPTIONS as BENCHMARK_OPTIONS
from ._pipeline import OBJECTIVES as OBJECTIVES
from ._pipeline import PROXY_OPTIONS as PROXY_OPTIONS
from ._pipeline import BenchmarkFits as BenchmarkFits
from ._pipeline import Pipeline as Pipeline
from ._pipeline import PipelineFit as PipelineFit
from ._pipeline import fit_benchmark_laws as fit_benchmark_laws
from ._pipeline import fit_pipeline as fit_pipeline
from ._resample import resample_weights as resample_weights
from ._save import load as load
from ._save import save as save
from ._select import SELECT_COLUMNS as SELECT_COLUMNS
from ._select import select_law as select_law
from ._tables import fit_benchmarks as fit_benchmarks
from ._tables import mixture_path as mixture_path
from .laws import CAMEL as CAMEL
from .laws import DML as DML
from .laws import AbstractLaw as AbstractLaw
from .laws import CAMELData as CAMELData
from .laws import Chinchilla as Chinchilla
from .laws import LossToBenchmark as LossToBenchmark
from .laws import PowerLaw as PowerLaw
from .laws import SODMAdditive as SODMAdditive
from .laws import SODMJoint as SODMJoint

# The public surface, by layer: laws, data, fitting, mixture, experiments (`camel_jax.simulate` and
# `camel_jax.plot` are namespaces of their own). docs/api/*.md has one entry per name (tests/test_docs.py).
__all__ = [
    # laws
    "AbstractLaw",
    "CAMEL",
    "CAMELData",
    "DML",
    "SODMAdditive",
    "SODMJoint",
    "Chinchilla",
    "PowerLaw",
    "LossToBenchmark",
    # data in and out
    "MixtureData",
    "BenchmarkData",
    "save",
    "load",
    # fitting
    "fit",
    "fit_arrays",
    "data_template",
    "implicit_solution",
    "DerivativeStatus",
    "fit_derivative_status",
    "influence",
    "Influence",
    "FitResult",
    "FitOptions",
    "Status",
    "objective",
    "huber",
    "bootstrap",
    "BootstrapResult",
    "resample_weights",
    "calibrate",
    "Calibration",
    # from losses to benchmarks to a mixture, and the decision
    "fit_benchmarks",
    "fit_benchmark_laws",
    "BenchmarkFits",
    "fit_pipeline",
    "Pipeline",
    "PipelineFit",
    "OBJECTIVES",
    "BENCHMARK_OPTIONS",
    "PROXY_OPTIONS",
    "optimal_mixture",
    "MixtureResult",
    "mixture_derivative_status",
    "implicit_mixture",
    "pick_influence",
    "PickInfluence",
    "influence_text",
    "project_capped_simplex",
    "mixture_path",
    "decide",
    "Decision",
    "objective_draws",
    "VERDICTS",
    "next_runs",
    "variance_reduction",
    "NEXT_COLUMNS",
    # experiments: design, the extrapolation protocol, law selection, backtests
    "flops",
    "perturbed_mixtures",
    "allocate",
    "sample_design",
    "STRATEGIES",
    "extrapolation_error",
    "compare_laws",
    "select_domains",
    "training_masks",
    "heldout_benchmark_error",
    "DMLNested",
    "select_law",
    "SELECT_COLUMNS",
    "backtest",
    "BACKTEST_METHODS",
    "BACKTEST_STRATEGIES",
    "BACKTEST_COLUMNS",
    "ADAPTIVE",
    "backtest_observed",
    "OBSERVED_METHODS",
    "OBSERVED_COLUMNS",
    "spearman",
    # ground-truth worlds
    "simulate",
]
