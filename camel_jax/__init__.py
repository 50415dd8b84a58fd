"""camel-jax: data-mixture scaling laws in JAX (CAMEL, DML, SODM, Chinchilla, loss-to-benchmark)."""

__version__ = "0.1.0"

from . import simulate as simulate
from ._bootstrap import BootstrapResult as BootstrapResult
from ._bootstrap import bootstrap as bootstrap
from ._bootstrap import resample_weights as resample_weights
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
from ._fit import fit as fit
from ._fit import huber as huber
from ._fit import objective as objective
from ._io import BenchmarkData as BenchmarkData
from ._io import MixtureData as MixtureData
from ._optimize import MixtureResult as MixtureResult
from ._optimize import mixture_path as mixture_path
from ._optimize import optimal_mixture as optimal_mixture
from ._optimize import project_capped_simplex as project_capped_simplex
from ._pipeline import OBJECTIVES as OBJECTIVES
from ._pipeline import BenchmarkFits as BenchmarkFits
from ._pipeline import Pipeline as Pipeline
from ._pipeline import PipelineFit as PipelineFit
from ._pipeline import fit_benchmarks as fit_benchmarks
from ._pipeline import fit_pipeline as fit_pipeline
from ._save import load as load
from ._save import register_law as register_law
from ._save import save as save
from .laws import CAMEL as CAMEL
from .laws import DML as DML
from .laws import AbstractLaw as AbstractLaw
from .laws import Chinchilla as Chinchilla
from .laws import LossToBenchmark as LossToBenchmark
from .laws import PowerLaw as PowerLaw
from .laws import SODMAdditive as SODMAdditive
from .laws import SODMJoint as SODMJoint
