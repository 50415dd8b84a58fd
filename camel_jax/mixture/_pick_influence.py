"""Which runs a recommended mixture rests on: each run's effect on the optimal mixture and on its predicted gain
over a reference, and their approximate change when the run is left out, with no refit and no new ascent.

The chain is runs -> the proxy-loss laws' parameters x_t (one fit per benchmark t, `PipelineFit.loss_fit`) ->
the optimal mixture r*(x) (its KKT conditions, `implicit_mixture`) and the score there (envelope theorem).
Each law's response to a run comes from `_influence.first_order` (one Hessian per law; the leave-one-out change
with its Sherman-Morrison leverage correction), and is carried to the mixture by the Jacobian of r*(x): so
`loo[p] = sum_t dr*/dx_t . loo_x_t[p]`. A run's weight is shared by every benchmark's fit, so its effects add up.

What it holds fixed: the loss-to-benchmark laws (the first stage of `fit_pipeline`) and the active set of the
mixture's bounds. A leave-one-out change large enough to free a weight held at a bound (or pin a free one) is a
first-order answer outside its range: exact refits tell, and the table's largest rows are the ones to check.

How good it is (tests/test_mixture_gradient.py: 30 runs, 3 benchmarks, tied CAMEL, 3 datasets, 0.1% noise):
Spearman >= 0.9 with exact leave-one-out refit-and-reoptimize for every weight and the gain, most runs within a
few percent, 4 of the exact top 5 runs found. A run the fit bends over (there, the one run with almost no weight
on a dataset at the largest size) can be undersold severalfold (0.0064 for an exact 0.026): the first-order
change of the fit itself is 70% off for it. Confirm the top rows with exact refits before acting on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike, Float

from ..fitting._influence import Influence, first_order, fit_derivative_status, one_target
from ..solver._implicit import DerivativeStatus, implicit_mixture, value_at_maximum
from ..solver._options import FitOptions, Status
from ._optimize import MixtureResult, _reference_mixture, mixture_derivative_status, optimal_mixture
from ._pipeline import Pipeline, PipelineFit


class PickInfluence(eqx.Module):
    """Each run's influence on a recommended mixture (see `camel_jax.mixture._pick_influence`). Rows are runs, columns
    quantities.

    **Fields**:

    - `names`: the quantities: the mixture's weights (`"r[<dataset>]"`), `"value"` (the score at the pick)
      and, with a reference, `"gain"` (the score at the pick minus at the reference).
    - `value` [m]: their values; `r` [n] the pick and `reference` [n] (or None).
    - `d_weight` [P, m]: derivative with respect to the run's weight (shared by every benchmark's fit);
      `loo` [P, m]: the approximate change when the run is left out.
    - `status`: a `DerivativeStatus` code; not OK means every derivative is NaN (`.reason` says why).
    - `weights` [P]: the runs' weights.
    """

    names: tuple[str, ...] = eqx.field(static=True)
    value: Float[Array, " m"]
    d_weight: Float[Array, "P m"]
    loo: Float[Array, "P m"]
    status: Array
    weights: Float[Array, " P"]
    r: Float[Array, " n"]
    reference: Array | None = None

    @property
    def datasets(self) -> list[str]:
        return [n[2:-1] for n in self.names if n.startswith("r[")]

    def shift(self) -> np.ndarray:
        """[P]: how far leaving each run out moves the pick, the largest change of any dataset's weight."""
        n = len(self.datasets)
        return np.max(np.abs(np.asarray(self.loo[:, :n])), axis=1)

    def table(self, runs: Sequence[Any] | None = None) -> Any:
        """A pandas DataFrame, one row per run (indexed by `runs`, else 0..P-1), sorted by `shift` (how far
        leaving the run out moves the pick), largest first, then by the gain's change: `weight`, `shift`, the
        approximate leave-one-out change of the gain (`loo_gain`; of the score at the pick, `loo_value`,
        without a reference) and its first-order rate per unit weight (`d_gain` / `d_value`), then each dataset's
        leave-one-out change (`loo_r[<dataset>]`). `attrs["decides"]` names the runs the pick rests on (see
        `deciding_runs`)."""
        import pandas as pd

        P = self.weights.shape[0]
        index = pd.Index(range(P) if runs is None else list(runs), name="run")
        if len(index) != P:
            raise ValueError(f"`runs` must name the {P} runs of the fit; got {len(index)} names")
        target = "gain" if "gain" in self.names else "value"
        j = self.names.index(target)
        columns = {
            "weight": np.asarray(self.weights),
            "shift": self.shift(),
            f"loo_{target}": np.asarray(self.loo[:, j]),
            f"d_{target}": np.asarray(self.d_weight[:, j]),
        }
        for i, name in enumerate(self.datasets):
            columns[f"loo_r[{name}]"] = np.asarray(self.loo[:, i])
        df = pd.DataFrame(columns, index=index)
        # By shift, then (weights held at their bounds do not move) by the size of the gain's change.
        order = np.lexsort((-np.abs(np.nan_to_num(df[f"loo_{target}"].to_numpy(), nan=np.inf)),
                            -np.nan_to_num(df["shift"].to_numpy(), nan=np.inf)))  # fmt: skip
        df = df.iloc[order]
        df.attrs["decides"] = [index[p] for p in self.deciding_runs()]
        return df

    def deciding_runs(self, share: float = 0.5) -> list[int]:
        """The fewest runs whose leave-one-out shifts of the pick make up `share` of all runs' total (largest
        first): the runs the recommended mixture rests on. Empty when no derivative exists."""
        shift = self.shift()
        if not np.all(np.isfinite(shift)) or shift.sum() <= 0:
            return []
        order = np.argsort(-shift, kind="stable")
        cumulative = np.cumsum(shift[order]) / shift.sum()
        return [int(p) for p in order[: int(np.searchsorted(cumulative, share)) + 1]]


def pick_influence(
    fit: PipelineFit,
    *,
    model_size: float,
    key: Array,
    reference: ArrayLike | None = None,
    mixture: MixtureResult | None = None,
    options: FitOptions | None = None,
    restarts: int = 16,
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    max_shift: float | None = None,
) -> PickInfluence:
    """Each run's influence on the recommended mixture of a `fit_pipeline` result and on its predicted gain.

    **Arguments**:

    - `fit`: a `PipelineFit` (its point `pipeline` and the proxy-loss fit `loss_fit`, one target per benchmark).
    - `model_size`: the target size; `key`: draws the ascent's starts when `mixture` is not given.
    - `reference`: the mixture the pick is compared with (the gain's columns), or None.
    - `mixture`: the `optimal_mixture(fit.pipeline, ...)` result, if already computed; else it is computed here
      with `restarts`, `lower`, `upper` and `max_shift` (a trust region around `reference`).
    - `options`: the objective the proxy-loss laws are differentiated in (default: the one they were fitted with,
      `fit.loss_fit.fit_options`).

    **Returns**: a `PickInfluence` (`.table()`, `.deciding_runs()`, `influence_text`). Costs one Hessian per
    benchmark law and one Jacobian of the mixture's KKT map: no refit, no new ascent.
    """
    result = fit.loss_fit
    pipeline = fit.pipeline
    options = result.fit_options if options is None else options
    if options.log_residuals != result.log_residuals:
        raise ValueError("`options.log_residuals` must match the fit's (`fit.loss_fit.log_residuals`)")
    benchmarks = [b for b, _ in pipeline.benchmark_weights]
    T = 1 if result.n_targets is None else int(result.n_targets)
    if T != len(benchmarks):
        raise ValueError(f"`fit.loss_fit` has {T} target(s) but the pipeline {len(benchmarks)} benchmarks")
    n = pipeline.n_datasets
    ref = None if reference is None else jnp.asarray(_reference_mixture(reference, n))
    if mixture is None:
        mixture = optimal_mixture(pipeline, n, key=key, model_size=model_size, restarts=restarts, lower=lower,
                                  upper=upper, reference=None if max_shift is None else reference,
                                  max_shift=max_shift)  # fmt: skip
    status = _status(fit, mixture, model_size, options)
    rows = [one_target(result, t) for t in range(T)]
    converged = jnp.asarray([Status(int(row.best_status)).is_converged for row in rows])
    laws = jax.tree.map(lambda a: a[None], result.law) if result.n_targets is None else result.law
    Y = jnp.atleast_2d(result.y)
    W = jnp.broadcast_to(result.weights, Y.shape)
    out = _pieces(laws, result.inputs, Y, W, converged, options, pipeline, jnp.asarray([float(model_size)]),
                  mixture, ref)  # fmt: skip
    if status != DerivativeStatus.OK:  # never a number where the derivative does not exist
        out = {k: v if k == "value" else jnp.full_like(v, jnp.nan) for k, v in out.items()}
    datasets = pipeline.datasets if pipeline.datasets is not None else tuple(str(j) for j in range(n))
    names = tuple(f"r[{d}]" for d in datasets) + ("value",) + (() if ref is None else ("gain",))
    run_weights = jnp.max(W, axis=0)
    return PickInfluence(names=names, status=jnp.asarray(int(status)), weights=run_weights, r=mixture.r,
                         reference=ref, **out)  # fmt: skip


def _status(fit: PipelineFit, mixture: MixtureResult, model_size: float, options: FitOptions) -> DerivativeStatus:
    """The first status that is not OK: a benchmark law's fit, then the mixture's."""
    result = fit.loss_fit
    T = 1 if result.n_targets is None else int(result.n_targets)
    for t in range(T):
        status = fit_derivative_status(one_target(result, t), options)
        if status != DerivativeStatus.OK:
            return status
    return mixture_derivative_status(mixture, fit.pipeline, model_size=model_size)


@eqx.filter_jit
def _pieces(laws, inputs, Y, W, converged, options, pipeline: Pipeline, size, mixture: MixtureResult, reference):
    first = jax.vmap(lambda law, y, w, c: first_order(law, inputs, y, w, c, options))(laws, Y, W, converged)
    template = jax.tree.map(lambda a: a[0], laws)
    params, static = eqx.partition(template, eqx.is_array)
    _, unravel = ravel_pytree(params)
    X = jax.vmap(lambda law: ravel_pytree(eqx.partition(law, eqx.is_array)[0])[0])(laws)  # [T, d]
    benchmarks = [b for b, _ in pipeline.benchmark_weights]

    def score(r: Array, pipe: Pipeline) -> Array:
        return pipe.score(r[None, :], size)[0]

    def quantity(X: Array) -> Array:
        fitted = {b: eqx.combine(unravel(X[t]), static) for t, b in enumerate(benchmarks)}
        pipe = eqx.tree_at(lambda p: p.loss_laws, pipeline, fitted)
        converged = jnp.asarray(True) if mixture.converged is None else mixture.converged
        r = implicit_mixture(score, mixture.r, pipe, lower=mixture.lower, upper=mixture.upper, converged=converged)
        value = value_at_maximum(score, mixture.r, pipe, converged=converged)
        parts = [r, value[None]]
        if reference is not None:
            parts.append((value - score(reference, pipe))[None])
        return jnp.concatenate(parts)

    jac = jax.jacfwd(quantity)(X)  # [m, T, d]
    return {
        "value": quantity(X),
        "d_weight": jnp.einsum("mtd,tpd->pm", jac, first["d_weight"]),
        "loo": jnp.einsum("mtd,tpd->pm", jac, first["loo"]),
    }


def influence_text(influence: Influence | PickInfluence, runs: Sequence[Any] | None = None, top: int = 5) -> str:
    """The influence section of `camel-jax fit` / `optimize` output: the `top` runs that move the prediction
    (an `Influence`: its first prediction, else its first parameter) or the pick (a `PickInfluence`) most when
    left out, approximately (one linear solve, no refits), as plain text lines.

    **Arguments**: `influence` (from `influence` or `pick_influence`); `runs`: the runs' names (else 0..P-1);
    `top`: how many runs to list.

    **Returns**: a string of lines (no trailing newline).
    """
    status = DerivativeStatus(int(influence.status))
    if status != DerivativeStatus.OK:
        return f"influence of each run: not available ({status.label}: {status.reason})"
    table = influence.table(runs=runs)
    names = [str(name) for name in table.index]
    if isinstance(influence, PickInfluence):
        target = "gain" if "gain" in influence.names else "value"
        lines = [f"which runs decide the pick (leaving one out, approximately; the {target} changes by loo_{target}):"]
        lines += ["  " + line for line in table.head(top).to_string(float_format=lambda v: f"{v:+.4f}").splitlines()]
        decides = [str(name) for name in table.attrs["decides"]]
        shift = table["shift"].to_numpy()
        if not shift[0] > 0:
            lines.append(f"the pick is held by its bounds: no run moves it to first order; the {target} moves")
            return "\n".join(lines)
        lines.append(
            f"the pick rests on {len(decides)} of {len(names)} runs ({', '.join(decides)}): leaving one out moves a "
            f"weight by up to {shift[0]:.3f}; the median run moves it by {float(np.median(shift)):.3f}"
        )
        return "\n".join(lines)
    quantity = table.attrs["quantity"]
    lines = [f"which runs the {quantity} rests on (leaving one out, approximately; loo is its change):"]
    lines += ["  " + line for line in table.head(top).to_string(float_format=lambda v: f"{v:+.4g}").splitlines()]
    return "\n".join(lines)
