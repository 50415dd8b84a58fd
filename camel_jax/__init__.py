"""camel-jax: data-mixture scaling laws in JAX (CAMEL, DML, SODM, Chinchilla, loss-to-benchmark)."""

import typing as _typing

from ._version import __version__ as __version__

# Every public name, imported when first used (`_lazy`: `import camel_jax`, and so the command line's `--help`,
# does not import JAX); type checkers and the docs read the imports here.
if _typing.TYPE_CHECKING:
    from . import simulate as simulate
    from .data._read import ReadNote as ReadNote
    from .data._read import read_runs as read_runs
    from .experiments._backtest import ADAPTIVE as ADAPTIVE
    from .experiments._backtest import BACKTEST_COLUMNS as BACKTEST_COLUMNS
    from .experiments._backtest import BACKTEST_METHODS as BACKTEST_METHODS
    from .experiments._backtest import BACKTEST_STRATEGIES as BACKTEST_STRATEGIES
    from .experiments._backtest import AdaptiveOptions as AdaptiveOptions
    from .experiments._backtest import backtest as backtest
    from .experiments._design import STRATEGIES as STRATEGIES
    from .experiments._design import allocate as allocate
    from .experiments._design import flops as flops
    from .experiments._design import perturbed_mixtures as perturbed_mixtures
    from .experiments._design import sample_design as sample_design
    from .experiments._evaluate import DMLNested as DMLNested
    from .experiments._evaluate import compare_laws as compare_laws
    from .experiments._evaluate import extrapolation_error as extrapolation_error
    from .experiments._evaluate import heldout_benchmark_error as heldout_benchmark_error
    from .experiments._evaluate import select_domains as select_domains
    from .experiments._evaluate import training_masks as training_masks
    from .experiments._observed import OBSERVED_COLUMNS as OBSERVED_COLUMNS
    from .experiments._observed import OBSERVED_METHODS as OBSERVED_METHODS
    from .experiments._observed import backtest_observed as backtest_observed
    from .experiments._observed import spearman as spearman
    from .experiments._select import SELECT_COLUMNS as SELECT_COLUMNS
    from .experiments._select import select_law as select_law
    from .fitting._bootstrap import BootstrapResult as BootstrapResult
    from .fitting._bootstrap import bootstrap as bootstrap
    from .fitting._bootstrap import bootstrap_fit as bootstrap_fit
    from .fitting._calibrate import Calibration as Calibration
    from .fitting._calibrate import DecisionCalibration as DecisionCalibration
    from .fitting._calibrate import calibrate as calibrate
    from .fitting._calibrate import calibrate_decision as calibrate_decision
    from .fitting._calibrate import replicate_noise as replicate_noise
    from .fitting._calibrate import replicate_weights as replicate_weights
    from .fitting._fit import FitResult as FitResult
    from .fitting._fit import FitWarning as FitWarning
    from .fitting._fit import data_template as data_template
    from .fitting._fit import fit as fit
    from .fitting._fit import fit_arrays as fit_arrays
    from .fitting._fit import huber as huber
    from .fitting._fit import objective as objective
    from .fitting._influence import Influence as Influence
    from .fitting._influence import fit_derivative_status as fit_derivative_status
    from .fitting._influence import influence as influence
    from .fitting._io import BenchmarkData as BenchmarkData
    from .fitting._io import MixtureData as MixtureData
    from .fitting._resample import resample_weights as resample_weights
    from .io._save import load as load
    from .io._save import read_metadata as read_metadata
    from .io._save import save as save
    from .laws import CAMEL as CAMEL
    from .laws import DML as DML
    from .laws import LAW_NAMES as LAW_NAMES
    from .laws import AbstractLaw as AbstractLaw
    from .laws import CAMELData as CAMELData
    from .laws import Chinchilla as Chinchilla
    from .laws import LogLinear as LogLinear
    from .laws import LossToBenchmark as LossToBenchmark
    from .laws import PowerLaw as PowerLaw
    from .laws import SODMAdditive as SODMAdditive
    from .laws import SODMJoint as SODMJoint
    from .laws import law_template as law_template
    from .mixture._decide import VERDICTS as VERDICTS
    from .mixture._decide import Decision as Decision
    from .mixture._decide import decide as decide
    from .mixture._decide import score_draws as score_draws
    from .mixture._export import EXPORT_FORMATS as EXPORT_FORMATS
    from .mixture._export import availability_caps as availability_caps
    from .mixture._export import export_mixture as export_mixture
    from .mixture._export import read_mixture as read_mixture
    from .mixture._loss_decision import SUPPORT_MARGIN as SUPPORT_MARGIN
    from .mixture._loss_decision import LossDecision as LossDecision
    from .mixture._loss_decision import data_support as data_support
    from .mixture._loss_decision import decide_loss as decide_loss
    from .mixture._loss_decision import loss_draws as loss_draws
    from .mixture._next import NEXT_COLUMNS as NEXT_COLUMNS
    from .mixture._next import next_runs as next_runs
    from .mixture._next import variance_reduction as variance_reduction
    from .mixture._optimize import AscentOptions as AscentOptions
    from .mixture._optimize import MixtureResult as MixtureResult
    from .mixture._optimize import mixture_derivative_status as mixture_derivative_status
    from .mixture._optimize import optimal_mixture as optimal_mixture
    from .mixture._optimize import project_capped_simplex as project_capped_simplex
    from .mixture._pick_influence import PickInfluence as PickInfluence
    from .mixture._pick_influence import influence_text as influence_text
    from .mixture._pick_influence import pick_influence as pick_influence
    from .mixture._pipeline import BENCHMARK_OPTIONS as BENCHMARK_OPTIONS
    from .mixture._pipeline import BENCHMARK_WEIGHTS as BENCHMARK_WEIGHTS
    from .mixture._pipeline import PROXY_OPTIONS as PROXY_OPTIONS
    from .mixture._pipeline import BenchmarkFits as BenchmarkFits
    from .mixture._pipeline import Pipeline as Pipeline
    from .mixture._pipeline import PipelineFit as PipelineFit
    from .mixture._pipeline import fit_benchmark_laws as fit_benchmark_laws
    from .mixture._pipeline import fit_pipeline as fit_pipeline
    from .mixture._tables import fit_benchmarks as fit_benchmarks
    from .mixture._tables import mixture_path as mixture_path
    from .solver._implicit import DerivativeStatus as DerivativeStatus
    from .solver._implicit import implicit_mixture as implicit_mixture
    from .solver._implicit import implicit_solution as implicit_solution
    from .solver._options import FitOptions as FitOptions
    from .solver._options import Status as Status

# The public surface, by layer: laws, data, fitting, mixture, experiments (`camel_jax.simulate` and
# `camel_jax.plot` are namespaces of their own). docs/api/*.md has one entry per name (tests/test_docs.py).
__all__ = [
    # laws
    "AbstractLaw",
    "CAMEL",
    "CAMELData",
    "DML",
    "LogLinear",
    "SODMAdditive",
    "SODMJoint",
    "Chinchilla",
    "PowerLaw",
    "LossToBenchmark",
    "law_template",
    "LAW_NAMES",
    # data in and out
    "read_runs",
    "ReadNote",
    "MixtureData",
    "BenchmarkData",
    "save",
    "load",
    "read_metadata",
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
    "FitWarning",
    "FitOptions",
    "Status",
    "objective",
    "huber",
    "bootstrap",
    "bootstrap_fit",
    "BootstrapResult",
    "resample_weights",
    "calibrate",
    "Calibration",
    "calibrate_decision",
    "DecisionCalibration",
    "replicate_noise",
    "replicate_weights",
    # from losses to benchmarks to a mixture, and the decision
    "fit_benchmarks",
    "fit_benchmark_laws",
    "BenchmarkFits",
    "fit_pipeline",
    "Pipeline",
    "PipelineFit",
    "BENCHMARK_WEIGHTS",
    "BENCHMARK_OPTIONS",
    "PROXY_OPTIONS",
    "optimal_mixture",
    "MixtureResult",
    "AscentOptions",
    "mixture_derivative_status",
    "implicit_mixture",
    "pick_influence",
    "PickInfluence",
    "influence_text",
    "project_capped_simplex",
    "mixture_path",
    "decide",
    "Decision",
    "score_draws",
    "VERDICTS",
    "decide_loss",
    "LossDecision",
    "data_support",
    "loss_draws",
    "SUPPORT_MARGIN",
    "next_runs",
    "variance_reduction",
    "NEXT_COLUMNS",
    "availability_caps",
    "export_mixture",
    "read_mixture",
    "EXPORT_FORMATS",
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
    "AdaptiveOptions",
    "backtest_observed",
    "OBSERVED_METHODS",
    "OBSERVED_COLUMNS",
    "spearman",
    # ground-truth worlds
    "simulate",
]

# Old names, deprecated (issue 33): each still gives the new name's object, with a warning, and is in no `__all__`.
# Hidden from mypy, which would otherwise accept any name of the package.
if not _typing.TYPE_CHECKING:
    from ._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(
        __name__, __file__, globals(), {"OBJECTIVES": "BENCHMARK_WEIGHTS", "objective_draws": "score_draws"}
    )
