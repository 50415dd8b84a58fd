"""The residuals every fit minimizes, shared by `_fit` and `_identify` (which measures what they determine), so
that the two never disagree."""

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
