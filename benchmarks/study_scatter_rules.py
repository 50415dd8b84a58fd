"""Study 10 (issue 56): would another run-to-run scatter give 3Mix a band of <= 3x the RMS error that still covers?

`FitResult.prediction_band` adds the fit's run-to-run scatter (`run_scatter`: the RMS of every fitted point's
log residual) to the bootstrap's band in quadrature. On Data Mixing Laws' 3Mix (fit 70M + 160M at every
checkpoint, 410M held out) the band covers 104 of 104 held-out rows at 3.16x their RMS error, past issue 56's 3x.
The in-sample residuals of the earliest checkpoints (the law misses the first few billion tokens by up to 50%) set
that scatter. This script scores the same bootstrap band with the scatter estimated by other rules, on the
fit and held-out rows that `benchmarks/heldout_mixinglaws.py --workdir DIR` leaves in DIR:

- `fit` (the shipped rule): RMS of every positive-weight log residual, scaled by n / dof (`run_scatter`);
- `robust`: 1.4826 x the median absolute deviation of the residuals (ignores the early checkpoints, as the fit's
  Huber loss does);
- `late`: RMS of the residuals at or above the median token count (the checkpoints nearest the held-out ones);
- `none`: the bootstrap's band alone.

Each at Student-t's 97.5% quantile, per target, then the band's coverage of the held-out rows and its mean
half-width over their RMS relative error (the score of `heldout_mixinglaws.summary`). Asserts nothing: a study.

    python benchmarks/heldout_mixinglaws.py --table 3Mix --laws log-linear-size --resamples 200 --workdir DIR
    python benchmarks/study_scatter_rules.py DIR [--law log-linear-size]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from camel_jax.cli._common import read_table
from camel_jax.fitting._student import t_quantile
from camel_jax.io._save import load, saved_reader


def scatter_rules(fit) -> dict[str, np.ndarray]:
    """{rule: [T] scatter sd on the log scale} for a fit of T targets under log residuals."""
    pred = np.atleast_2d(np.asarray(fit.predict(*fit.inputs), float))
    y, w = np.atleast_2d(np.asarray(fit.y, float)), np.atleast_2d(np.asarray(fit.weights, float))
    tokens = np.asarray(fit.inputs[2], float)
    sd, _ = fit.run_scatter()
    rules: dict[str, list[float]] = {"fit": list(np.atleast_1d(sd)), "robust": [], "late": [], "none": []}
    for t in range(y.shape[0]):
        used = w[t] > 0
        r = np.log(pred[t][used] / y[t][used])
        rules["robust"].append(1.4826 * float(np.median(np.abs(r - np.median(r)))))
        late = tokens[used] >= np.median(tokens[used])
        rules["late"].append(float(np.sqrt(np.mean(r[late] ** 2))))
        rules["none"].append(0.0)
    return {name: np.asarray(values) for name, values in rules.items()}


def score(pred, low, high, y, used, sd, dof) -> dict[str, float]:
    """The band (bootstrap low/high widened by `sd` at t's quantile, in quadrature on the log scale): coverage of
    the held-out rows and mean half-width over their RMS relative error."""
    q = t_quantile(0.975, dof)
    p_, lo_, hi_, y_ = [], [], [], []
    for t in range(y.shape[0]):
        m = used[t]
        below = np.log(np.maximum(pred[t][m] / low[t][m], 1.0))
        above = np.log(np.maximum(high[t][m] / pred[t][m], 1.0))
        p_.append(pred[t][m])
        lo_.append(pred[t][m] * np.exp(-np.hypot(below, q * sd[t])))
        hi_.append(pred[t][m] * np.exp(np.hypot(above, q * sd[t])))
        y_.append(y[t][m])
    p, lo, hi, obs = map(np.concatenate, (p_, lo_, hi_, y_))
    rel = (p - obs) / obs
    covered = (lo <= obs) & (obs <= hi)
    return {"coverage": float(covered.mean()),
            "halfwidth/RMS": float(np.mean((hi - lo) / 2 / obs) / np.sqrt(np.mean(rel**2)))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--law", default="log-linear-size")
    args = parser.parse_args()
    path = Path(args.workdir) / f"fit_{args.law}.npz"
    fit = load(path)
    options = {key: value for key, value in (saved_reader(path) or {}).items() if value is not None}
    rows = read_table(argparse.Namespace(csv=[str(Path(args.workdir) / "test.csv")]), **options)
    inputs = rows.inputs[: len(fit.inputs)]
    pred, low, high = (np.atleast_2d(np.asarray(a, float)) for a in fit.prediction_band(*inputs, new_runs=False))
    y, used = np.atleast_2d(np.asarray(rows.y, float)), np.atleast_2d(np.asarray(rows.weight, float)) > 0
    _, dof = fit.run_scatter()
    targets = list(fit.targets) if fit.targets is not None else ["loss"]
    print(f"{path}: {len(targets)} targets ({', '.join(targets)}), {int(used.sum())} held-out rows, dof {dof}")
    print(f"{'rule':8s} {'scatter sd per target (log)':36s} {'covers':>7s} {'half-width/RMS':>15s}")
    for name, sd in scatter_rules(fit).items():
        out = score(pred, low, high, y, used, sd, dof)
        print(f"{name:8s} {', '.join(f'{s:.4f}' for s in sd):36s} {out['coverage']:7.3f} {out['halfwidth/RMS']:15.2f}")


if __name__ == "__main__":
    main()
