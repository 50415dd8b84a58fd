"""`camel-jax next --fit saved --candidates runs.csv`: the candidate runs that would most sharpen the decision, per
FLOP."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    UserError,
    _best_starts,
    _check_destination,
    _floats,
    _load_fit,
    _mixture_names,
    _read_csv,
    _training_data,
    _warn_extrapolation,
    _warn_unreliable,
)


def add_parser(sub: Any) -> None:
    nxt = sub.add_parser("next", help="the candidate runs that would most sharpen the decision, per FLOP -> CSV")
    nxt.add_argument("--fit", required=True, help="a .npz of `camel-jax fit` (bootstrapped here), or camel_jax.save "
                     "of a fit_pipeline result, a batched pipeline or a BootstrapResult")  # fmt: skip
    nxt.add_argument("--candidates", required=True, help="CSV of runs not yet trained: r_* columns, size, flops")
    nxt.add_argument("--mixture", default=None, help="the candidates' mixture columns, in the fit's dataset order "
                     "(default: the columns the fit was made on, matched by name)")  # fmt: skip
    nxt.add_argument("--budget", type=float, required=True, help="FLOPs the next runs may spend")
    nxt.add_argument("--size", type=float, required=True, help="the target model size the decision is for")
    nxt.add_argument("--batch", type=int, default=1, help="at most this many runs (default 1)")
    nxt.add_argument("--noise", type=float, default=None, help="sd of one measured outcome (default: the fit's rms "
                     "residual, or a fit_pipeline result's score noise; required for a saved pipeline or "
                     "bootstrap)")  # fmt: skip
    nxt.add_argument("--reference", default=None, help="score the gain over this mixture (comma-separated)")
    nxt.add_argument("--resamples", type=int, default=200, help="bootstrap resamples of a `fit` .npz (default 200)")
    nxt.add_argument("--seed", type=int, default=0)
    nxt.add_argument("--out", default=None, help="also write the chosen runs to this CSV")


def run(args: argparse.Namespace) -> None:
    import jax

    from ..mixture._next import next_runs

    for name in ("budget", "size"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value > 0):
            raise UserError(f"--{name} must be a positive number; got {value}")
    if args.noise is not None and not (np.isfinite(args.noise) and args.noise >= 0):
        raise UserError(f"--noise must be >= 0; got {args.noise}")
    if args.batch < 1:
        raise UserError(f"--batch must be >= 1; got {args.batch}")
    if args.out:
        _check_destination(Path(args.out))
    candidates = _read_csv(args.candidates)
    reference = np.asarray(_floats(args.reference, "reference")) if args.reference else None
    saved = _load_fit(args.fit)
    _warn_extrapolation(saved, args.size)
    _warn_unreliable(saved, args.fit)
    columns = _candidate_columns(saved, candidates, args.candidates, args.mixture)
    if reference is not None:
        from ..mixture._optimize import _reference_mixture

        reference = _reference_mixture(reference, len(columns))
    key = jax.random.key(args.seed)
    ensemble, noise = _ensemble_of(args, saved, key)
    out = next_runs(ensemble, candidates, budget=args.budget, target_size=args.size, key=key, batch=args.batch,
                    reference=reference, noise=noise, mixture=columns)  # fmt: skip
    names = _mixture_names(saved, len(columns))
    print(f"decision sd today {out.attrs['sd_before']:.4g}; recommended mixture at size {args.size:g}: "
          + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, out.attrs["recommended"])))  # fmt: skip
    if out.empty:
        print("no candidate within the budget would change the decision's uncertainty")
    for _, row in out.iterrows():
        print(f"  {int(row['order'])}. candidate row {row.name}: size {row['size']:g}, cost {row['cost']:.3g} FLOPs, "
              f"sd after {row['sd_after']:.4g}")  # fmt: skip
    if args.out:
        out.to_csv(args.out, index=True, index_label="candidate_row")
        print(f"wrote {args.out}")


def _candidate_columns(saved: Any, candidates: Any, path: str, mixture: str | None = None) -> list[str]:
    """The candidates' mixture columns, matched by name to those the fit was made on (a missing column, or an r_*
    column the fit never saw, is an error naming it), and the table checked, all before the bootstrap."""
    from ..fitting._bootstrap import BootstrapResult
    from ..fitting._io import MixtureData, match_mixture_columns
    from ..mixture._pipeline import Pipeline

    n: Any
    if isinstance(saved, Pipeline):
        n = saved.n_datasets
    else:
        law = saved.laws if isinstance(saved, BootstrapResult) else _training_data(saved).law
        n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
        if n is None:
            raise UserError(f"`next` needs a law of the mixture; this one is a {type(law).__name__}")
    fitted = _training_data(saved) if not isinstance(saved, (Pipeline, BootstrapResult)) else None
    names = getattr(fitted, "names", None) or getattr(saved, "datasets", None)
    if len(candidates) == 0:
        raise UserError(f"{path} has no rows: no candidate runs to choose from")
    if mixture is not None:
        columns = [c.strip() for c in mixture.split(",") if c.strip()]
        if len(columns) != n:
            raise UserError(f"--mixture names {len(columns)} column(s); the fit has {n} datasets")
        if names is not None and columns != list(names):
            pairs = ", ".join(f"{c} as {f}" for c, f in zip(columns, names) if c != f)
            print(f"note: --mixture reads the candidates' {pairs} (the fit's columns, in its order)")
    else:
        columns = match_mixture_columns(candidates, names, int(n), path)
    MixtureData.from_frame(candidates, mixture=columns, target="flops", size="size")
    return columns


def _ensemble_of(args: argparse.Namespace, saved: Any, key: Any) -> tuple[Any, float | None]:
    """The resample ensemble behind `next`, and the outcome noise: a saved ensemble as is; a `fit` .npz
    bootstrapped here (warm-started from its 4 best starts), with its rms residual as the default noise."""

    from ..fitting._bootstrap import BootstrapResult, bootstrap
    from ..fitting._fit import FitResult
    from ..mixture._pipeline import Pipeline, PipelineFit

    if isinstance(saved, PipelineFit):  # its score's noise is the default
        return saved, args.noise
    if isinstance(saved, (BootstrapResult, Pipeline)):
        if args.noise is None:
            raise UserError(f"--noise is required with a saved {type(saved).__name__} (it holds no residuals)")
        return saved, args.noise
    if not isinstance(saved, FitResult) or len(saved.inputs) != 2 or np.ndim(saved.y) != 1:
        raise UserError(f"{args.fit}: `next` needs one law of (mixture, size), a batched pipeline or a bootstrap")
    if args.resamples < 2:
        raise UserError(f"--resamples must be >= 2; got {args.resamples}")
    residual = np.asarray(saved.y) - np.asarray(saved.predict(*saved.inputs))
    noise = float(np.sqrt(np.average(residual**2, weights=np.asarray(saved.weights))))
    warm = _best_starts(saved)
    boot = bootstrap(saved.law, saved.inputs, saved.y, key=key, n_resamples=args.resamples, inits=warm,
                     weights=saved.weights, progress=False, options=saved.fit_options)  # fmt: skip
    return boot, noise if args.noise is None else args.noise
