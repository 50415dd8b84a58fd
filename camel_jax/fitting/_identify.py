"""What the data determine: a Laplace (Gauss-Newton) look at a fitted law in its unconstrained coordinates.

A scaling-law fit can reach its best objective while some parameters stay free: with model sizes spanning less
than a decade, C trades against the K_i (a term with beta -> 0 and K -> infinity becomes C' - b log M, so the
objective keeps falling as C -> -infinity); a redundant intrinsic domain dies (beta -> infinity or K -> 0); a
profile saturates at a vertex of the simplex (logits -> infinity). Such a parameter is reported as a precise
number by the optimizer but is set by where it stopped, not by the data.

Near the optimum, the residuals r(x) (log residuals, or plain ones) are close to linear in the unconstrained
parameters x, and the least-squares information is `F = J^T W J`. With the noise variance estimated as
`s^2 = sum_p w_p r_p^2 / (n - d)` (n points with positive weight, d parameters), the Laplace standard deviation of
coordinate j is `sd_j = s sqrt((F^+)_jj)`, infinite along a direction where F vanishes to working precision.
The report is on the law's own parameters (`law.params()`), through the delta method: the standard deviation of
log(value) for a parameter that is positive at the fit (K, the exponents, the profiles t: a relative
uncertainty), of the value itself otherwise (C). Directions that change no parameter (adding a constant to a
column of softmax logits) are gauge, not ignorance, and are left out. A parameter is *not identified* when its
standard deviation exceeds `max_sd`: with the default 1, a positive quantity is uncertain by more than a factor
e, a real one by more than one unit of loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ._residuals import fit_residuals  # the fit's own residuals


class Identifiability(eqx.Module):
    """What the data determine about one fitted law (see the module docstring).

    **Fields**:

    - `names`: one per parameter element of `law.params()`, e.g. `"C"`, `"beta[1]"`, `"t[0, 2]"`.
    - `sd`: their standard deviations (of the log for positive parameters), inf where the data say nothing.
    - `eigenvalues`: the spectrum of the information `J^T W J` in the unconstrained coordinates, ascending.
    - `noise_variance`: `s^2`, the residual variance the information is scaled by.
    - `not_identified`: the names whose `sd` exceeds `max_sd`.
    - `max_sd`: the threshold used.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    sd: np.ndarray
    eigenvalues: np.ndarray
    noise_variance: float
    not_identified: tuple[str, ...] = eqx.field(static=True)
    max_sd: float = eqx.field(static=True)


def element_names(name: str, value: Any) -> list[str]:
    """`name` for a scalar, else `name[i, j]` for every element of `value` (row-major, as `ravel`)."""
    shape = np.shape(value)
    return [name] if shape == () else [f"{name}[{', '.join(map(str, i))}]" for i in np.ndindex(*shape)]


def paper_params(law: Any) -> dict[str, Any]:
    """The parameters `identifiability` reports by default: the law's own `params()`."""
    return law.params()


@eqx.filter_jit
def _derivatives(law, inputs, y, weights, log_residuals: bool, positive: tuple[bool, ...], coordinates=paper_params):
    """The residuals' Jacobian [P, d], the natural parameters' Jacobian [m, d] (logs of the positive ones) in
    the unconstrained coordinates, and the residuals [P] (zero where the weight is zero). Compiled once per
    law structure (and `coordinates`, a module-level function)."""
    params, static = eqx.partition(law, eqx.is_array)
    x, unravel = ravel_pytree(params)
    used = jnp.asarray(weights) > 0
    y_safe = jnp.where(used, y, 1.0)

    def r(z):
        fitted = eqx.combine(unravel(z), static)(*inputs)
        return jnp.where(used, fit_residuals(fitted, y_safe, weights, log_residuals), 0.0)

    def natural(z):
        values = coordinates(eqx.combine(unravel(z), static)).values()
        return jnp.concatenate([jnp.ravel(jnp.log(v) if p else v) for p, v in zip(positive, values)])

    return jax.jacfwd(r)(x), jax.jacfwd(natural)(x), r(x)


def identifiability(
    law: Any,
    inputs: tuple[Any, ...],
    y: Any,
    weights: Any,
    *,
    log_residuals: bool = True,
    max_sd: float = 1.0,
    coordinates: Callable[[Any], dict[str, Any]] = paper_params,
) -> Identifiability:
    """The standard deviation of every parameter of one (unbatched) fitted law, and which the data leave free.

    **Arguments**: the law, the fitted data (`inputs`, `y` [P], `weights` [P]), how residuals were measured,
    `max_sd`, the threshold above which a parameter is reported as not identified, and `coordinates`, the
    parameters reported: a function of the law to a dict of arrays (default its `params()`; e.g.
    `CAMEL.log_limit_params` for a fit in the log-law limit, where the paper's C and K are infinite).

    **Returns**: an `Identifiability` over the elements of `coordinates(law)`."""
    if not (isinstance(max_sd, (int, float)) and np.isfinite(max_sd) and max_sd > 0):
        raise ValueError(f"`max_sd` must be a finite number > 0; got {max_sd!r}")
    fitted = coordinates(law)
    positive = tuple(bool(np.all(np.asarray(v) > 0)) for v in fitted.values())
    derivatives = _derivatives(
        law, tuple(inputs), jnp.asarray(y), jnp.asarray(weights), log_residuals, positive, coordinates
    )
    eps = float(np.finfo(derivatives[0].dtype).eps)  # the fit's working precision
    jacobian, to_params, res = (np.asarray(a, dtype=float) for a in derivatives)
    wn = np.asarray(weights, dtype=float)
    n, d = int(np.sum(wn > 0)), jacobian.shape[1]
    noise_variance = float(np.sum(wn * res**2) / max(n - d, 1))
    eigenvalues, vectors = np.linalg.eigh(jacobian.T @ (wn[:, None] * jacobian))
    # Below working precision relative to the largest eigenvalue a direction carries no information: its
    # eigenvalue is raised to that floor, which gives the parameters it moves a huge variance.
    floor = max(float(eigenvalues[-1]), np.finfo(float).tiny) * d * eps
    moved = to_params @ vectors  # [m, d]: how each eigen-direction moves each parameter
    size = np.linalg.norm(moved, axis=0)
    gauge = size <= np.sqrt(eps) * max(float(np.max(size)), np.finfo(float).tiny)
    variance = (np.where(gauge[None, :], 0.0, moved**2) / np.maximum(eigenvalues, floor)[None, :]).sum(axis=1)
    sd = np.sqrt(noise_variance * variance) if n > d else np.full(variance.shape, np.inf)
    names = tuple(n for name, value in fitted.items() for n in element_names(name, value))
    return Identifiability(
        names=names,
        sd=sd,
        eigenvalues=eigenvalues,
        noise_variance=noise_variance,
        not_identified=tuple(name for name, s in zip(names, sd) if not s <= max_sd),
        max_sd=float(max_sd),
    )
