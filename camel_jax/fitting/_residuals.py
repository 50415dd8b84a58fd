"""The residuals every fit minimizes, shared by `_fit`, `_influence` and `_identify` (which measures what they
determine), so that they never disagree."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

# Under log residuals, predictions below this fraction of the target continue the log linearly (see `residuals`).
LOG_FLOOR = 1e-4


def residuals(prediction: Array, y: Array, log_residuals: bool) -> Array:
    """`log pred - log y` (or `pred - y`).

    A non-positive prediction has no log. Below `LOG_FLOOR * y` the log is continued by its tangent line, so the
    residual stays finite and keeps pushing the prediction up, and gradients never see log(<= 0).
    """
    if not log_residuals:
        return prediction - y
    floor = LOG_FLOOR * y
    above = prediction >= floor
    log_part = jnp.log(jnp.where(above, prediction, floor)) - jnp.log(y)
    linear_part = float(np.log(LOG_FLOOR)) + (prediction - floor) / floor  # a Python float stays weakly typed
    return jnp.where(above, log_part, linear_part)


def target_scale(y: Array, weights: Array) -> Array:
    """The targets' weighted root mean square over the points of positive weight (1 when it is 0): the unit of
    plain residuals, so that Huber's `delta` and the gradient tolerance mean a fraction of the targets' size, as
    they do under log residuals, and multiplying the targets by c changes the fit's predictions by c only."""
    total = jnp.sum(weights)  # weights are >= 0: those of the unused points add nothing
    square = jnp.sum(weights * jnp.where(weights > 0, y, 0.0) ** 2)  # an unused point's y may be NaN
    scale = jnp.sqrt(square / jnp.where(total > 0, total, 1.0))
    return jnp.where(scale > 0, scale, 1.0)


def fit_residuals(prediction: Array, y: Array, weights: Array, log_residuals: bool) -> Array:
    """The residuals a fit's objective takes: `log pred - log y` (`residuals`), or `(pred - y) / s` with s the
    targets' weighted root mean square (`target_scale`). `y` must be finite where `weights` are positive."""
    if log_residuals:
        return residuals(prediction, y, True)
    return (prediction - y) / target_scale(y, weights)
