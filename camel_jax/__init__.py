"""camel-jax: data-mixture scaling laws in JAX (CAMEL, DML, SODM, Chinchilla, loss-to-benchmark)."""

import typing as _typing

from ._version import __version__ as __version__

# Every public name, imported when first used (`_lazy`: `import camel_jax`, and so the command line's `--help`,
# does not import JAX); type checkers and the docs read the imports here.
if _typing.TYPE_CHECKING:
    from . import experiments as experiments
    from . import fitting as fitting
    from . import mixture as mixture
    from . import simulate as simulate
    from .data._containers import BenchmarkData as BenchmarkData
    from .data._containers import MixtureData as MixtureData
    from .data._read import read_runs as read_runs
    from .fitting._bootstrap import BootstrapResult as BootstrapResult
    from .fitting._bootstrap import bootstrap as bootstrap
    from .fitting._bootstrap import bootstrap_fit as bootstrap_fit
    from .fitting._calibrate import Calibration as Calibration
    from .fitting._calibrate import calibrate as calibrate
    from .fitting._fit import FitResult as FitResult
    from .fitting._fit import FitWarning as FitWarning
    from .fitting._fit import fit as fit
    from .fitting._fit import fit_arrays as fit_arrays
    from .fitting._influence import Influence as Influence
    from .fitting._influence import influence as influence
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
    from .mixture._decide import Decision as Decision
    from .mixture._decide import decide as decide
    from .mixture._export import availability_caps as availability_caps
    from .mixture._export import export_mixture as export_mixture
    from .mixture._export import read_mixture as read_mixture
    from .mixture._loss_decision import LossDecision as LossDecision
    from .mixture._loss_decision import decide_loss as decide_loss
    from .mixture._next import next_runs as next_runs
    from .mixture._optimize import MixtureResult as MixtureResult
    from .mixture._optimize import optimal_mixture as optimal_mixture
    from .mixture._pipeline import BENCHMARK_WEIGHTS as BENCHMARK_WEIGHTS
    from .mixture._pipeline import Pipeline as Pipeline
    from .mixture._pipeline import PipelineFit as PipelineFit
    from .mixture._pipeline import fit_pipeline as fit_pipeline
    from .mixture._tables import fit_benchmarks as fit_benchmarks
    from .solver._options import FitOptions as FitOptions
    from .solver._options import Status as Status

# The public surface, the core a user holds in mind (issue 58: at most 50 names), by layer: laws, data, fitting,
# mixture. The building blocks under them live in the namespaces `camel_jax.fitting` and `camel_jax.mixture`, the
# experiment tools in `camel_jax.experiments`, ground-truth worlds in `camel_jax.simulate`, and the figures in
# `camel_jax.plot` (imported on first use: matplotlib is optional). docs/api/*.md has one entry per name of each
# (tests/test_docs.py).
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
    "LogLinear",
    "LossToBenchmark",
    "law_template",
    "LAW_NAMES",
    # data in and out
    "read_runs",
    "MixtureData",
    "BenchmarkData",
    "save",
    "load",
    "read_metadata",
    # fitting
    "fit",
    "fit_arrays",
    "influence",
    "Influence",
    "FitResult",
    "FitWarning",
    "FitOptions",
    "Status",
    "bootstrap",
    "bootstrap_fit",
    "BootstrapResult",
    "calibrate",
    "Calibration",
    # from losses to benchmarks to a mixture, and the decision
    "fit_benchmarks",
    "fit_pipeline",
    "Pipeline",
    "PipelineFit",
    "BENCHMARK_WEIGHTS",
    "optimal_mixture",
    "MixtureResult",
    "decide",
    "Decision",
    "decide_loss",
    "LossDecision",
    "next_runs",
    "availability_caps",
    "export_mixture",
    "read_mixture",
    # the namespaces: building blocks, experiment tools, ground-truth worlds
    "fitting",
    "mixture",
    "experiments",
    "simulate",
]

# Old names, deprecated: each still gives the new name's object, with a warning, and is in no `__all__`. Issue 33
# renamed the score's side; issue 58 moved the building blocks and the experiment tools to their namespaces.
_RENAMED = {
    "OBJECTIVES": "BENCHMARK_WEIGHTS",
    "objective_draws": "camel_jax.mixture.score_draws",
    "data_template": "camel_jax.fitting.data_template",
    "objective": "camel_jax.fitting.objective",
    "huber": "camel_jax.fitting.huber",
    "resample_weights": "camel_jax.fitting.resample_weights",
    "implicit_solution": "camel_jax.fitting.implicit_solution",
    "DerivativeStatus": "camel_jax.fitting.DerivativeStatus",
    "fit_derivative_status": "camel_jax.fitting.fit_derivative_status",
    "calibrate_decision": "camel_jax.fitting.calibrate_decision",
    "DecisionCalibration": "camel_jax.fitting.DecisionCalibration",
    "replicate_noise": "camel_jax.fitting.replicate_noise",
    "replicate_weights": "camel_jax.fitting.replicate_weights",
    "fit_benchmark_laws": "camel_jax.mixture.fit_benchmark_laws",
    "BenchmarkFits": "camel_jax.mixture.BenchmarkFits",
    "BENCHMARK_OPTIONS": "camel_jax.mixture.BENCHMARK_OPTIONS",
    "PROXY_OPTIONS": "camel_jax.mixture.PROXY_OPTIONS",
    "AscentOptions": "camel_jax.mixture.AscentOptions",
    "mixture_derivative_status": "camel_jax.mixture.mixture_derivative_status",
    "implicit_mixture": "camel_jax.mixture.implicit_mixture",
    "pick_influence": "camel_jax.mixture.pick_influence",
    "PickInfluence": "camel_jax.mixture.PickInfluence",
    "influence_text": "camel_jax.mixture.influence_text",
    "project_capped_simplex": "camel_jax.mixture.project_capped_simplex",
    "mixture_path": "camel_jax.mixture.mixture_path",
    "score_draws": "camel_jax.mixture.score_draws",
    "VERDICTS": "camel_jax.mixture.VERDICTS",
    "variance_reduction": "camel_jax.mixture.variance_reduction",
    "NEXT_COLUMNS": "camel_jax.mixture.NEXT_COLUMNS",
    "EXPORT_FORMATS": "camel_jax.mixture.EXPORT_FORMATS",
    "flops": "camel_jax.experiments.flops",
    "perturbed_mixtures": "camel_jax.experiments.perturbed_mixtures",
    "allocate": "camel_jax.experiments.allocate",
    "sample_design": "camel_jax.experiments.sample_design",
    "STRATEGIES": "camel_jax.experiments.STRATEGIES",
    "extrapolation_error": "camel_jax.experiments.extrapolation_error",
    "compare_laws": "camel_jax.experiments.compare_laws",
    "select_domains": "camel_jax.experiments.select_domains",
    "training_masks": "camel_jax.experiments.training_masks",
    "heldout_benchmark_error": "camel_jax.experiments.heldout_benchmark_error",
    "DMLNested": "camel_jax.experiments.DMLNested",
    "select_law": "camel_jax.experiments.select_law",
    "SELECT_COLUMNS": "camel_jax.experiments.SELECT_COLUMNS",
    "backtest": "camel_jax.experiments.backtest",
    "BACKTEST_METHODS": "camel_jax.experiments.BACKTEST_METHODS",
    "BACKTEST_STRATEGIES": "camel_jax.experiments.BACKTEST_STRATEGIES",
    "BACKTEST_COLUMNS": "camel_jax.experiments.BACKTEST_COLUMNS",
    "ADAPTIVE": "camel_jax.experiments.ADAPTIVE",
    "AdaptiveOptions": "camel_jax.experiments.AdaptiveOptions",
    "backtest_observed": "camel_jax.experiments.backtest_observed",
    "OBSERVED_METHODS": "camel_jax.experiments.OBSERVED_METHODS",
    "OBSERVED_COLUMNS": "camel_jax.experiments.OBSERVED_COLUMNS",
    "spearman": "camel_jax.experiments.spearman",
}

# Hidden from mypy, which would otherwise accept any name of the package.
if not _typing.TYPE_CHECKING:
    import importlib as _importlib

    from ._deprecated import warn_renamed as _warn_renamed
    from ._lazy import lazy_names as _lazy_names

    _lazy_attribute, __dir__ = _lazy_names(__name__, __file__, globals(), {})

    def __getattr__(name):
        if name == "plot":  # imported on first use, so that matplotlib stays optional
            return _importlib.import_module("camel_jax.plot")
        if name == "solver":  # the solver, standing alone (`cj.solver.minimise`), kept off the top level's names
            return _importlib.import_module("camel_jax.solver")
        new = _RENAMED.get(name)
        if new is None:
            return _lazy_attribute(name)
        if "." in new:  # moved to a namespace
            where, _, attribute = new.rpartition(".")
            _warn_renamed(f"{__name__}.{name}", new)
            return getattr(_importlib.import_module(where), attribute)
        _warn_renamed(f"{__name__}.{name}", f"{__name__}.{new}")
        return _lazy_attribute(new)
