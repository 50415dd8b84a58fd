"""`camel_jax.fitting`: the building blocks under `cj.fit`, `cj.bootstrap` and `cj.calibrate`. The fit objective
(`objective`, `huber`, `data_template`), resample weights, the implicit derivative of a fit and its status, the
calibration of a decision's gain, and the noise of replicated runs.

The fitting layer holds the objective, `fit` / `fit_arrays`, resampling and the bootstrap,
identifiability, extrapolation calibration and each run's influence. It imports the laws, the data layer and the
solver, never the mixture or experiment layers."""

from ..solver._implicit import DerivativeStatus as DerivativeStatus
from ..solver._implicit import implicit_solution as implicit_solution
from ._calibrate import DecisionCalibration as DecisionCalibration
from ._calibrate import calibrate_decision as calibrate_decision
from ._calibrate import replicate_noise as replicate_noise
from ._calibrate import replicate_weights as replicate_weights
from ._fit import data_template as data_template
from ._fit import huber as huber
from ._fit import objective as objective
from ._influence import fit_derivative_status as fit_derivative_status
from ._resample import resample_weights as resample_weights

# docs/api/fitting.md has one entry per name (tests/test_docs.py)
__all__ = [
    "objective",
    "huber",
    "data_template",
    "resample_weights",
    "implicit_solution",
    "DerivativeStatus",
    "fit_derivative_status",
    "calibrate_decision",
    "DecisionCalibration",
    "replicate_noise",
    "replicate_weights",
]
