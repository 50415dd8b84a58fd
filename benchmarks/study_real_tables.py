"""Study 10 (issue 56): held-out error of `camel-jax fit`'s default law choice on the real tables, before and after
the choice read the table, beside the best shipped law; 95% bootstrap bands; RegMix's own ranking split.

Each table is split into the user's runs (what `fit` sees) and held-out runs:

- dmsl_shukor2025: each (mixture, size)'s longest run; fit <= 1.235B, hold out the four 2.718B runs; the 7 domain
  losses (rows with a missing loss dropped).
- mixinglaws_ye2024 3Mix, 5Mix (every run below id 900, every step, the loss weighted by valid_weight.json): hold
  out the largest size with more than one mixture (3Mix: 410M; 5Mix: 1B). 2Mix holds 2 sizes: its training part
  is one size whose tokens vary, where no shipped law extrapolates in size (said, not scored).
- regmix_liu2024 (13 validation losses, one size): hold out a quarter of the 512 1M runs, chosen with the seed.
- RegMix's own split: fit the 512 1M runs, rank the 256 held-out 1M runs (Spearman per loss).

"before" is the choice as it was on main (fewer than 4 sizes: camel-tied; otherwise the lowest error at the
largest training size among camel-tied, camel-free, sodm-additive, camel-data-free, camel-data-tied, tokens read
where the table has them); "after" is `--law auto` now (`cli.fit._choose_law`'s rule, re-run here on several
targets at once, each target choosing for itself; the command line chooses one law for every target, on the mean
of the targets' held-out MAPEs, each target fitted: `benchmarks/heldout_mixinglaws.py` runs it on 3Mix). On a
single-size table its candidates are `AUTO_MIXTURE_LAWS` (log-linear, dml, camel-mixture). Both are fitted by
name with the same starts. The best shipped law is the lowest held-out error among every candidate either rule
considers. Bands: the percentile band of `--resamples` bootstrap refits (no
calibration), coverage of the held-out rows and its mean half-width over the held-out RMS error.

The machine this ran on has 2 cores shared with others: restarts 16 and resamples 50 by default.

    python benchmarks/study_real_tables.py [--restarts 16] [--resamples 50] [--seed 0] [--tables dmsl,3mix,5mix,regmix]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import shared_data  # noqa: E402

import camel_jax as cj  # noqa: E402
from camel_jax.cli.fit import AUTO_LAWS, AUTO_MIN_SIZES, AUTO_MIXTURE_LAWS, AUTO_MIXTURE_SHARE  # noqa: E402
from camel_jax.experiments._select import simplest_within, takes_tokens  # noqa: E402
from camel_jax.fitting._degenerate import degenerate_parameters  # noqa: E402
from camel_jax.laws import LAWS, law_template  # noqa: E402
from camel_jax.laws._base import n_free_parameters  # noqa: E402
from camel_jax.solver._options import Status  # noqa: E402

jax.config.update("jax_enable_x64", True)
warnings.simplefilter("ignore")  # fits that fail are columns of the tables (converged, degenerate), not warnings

MAIN_AUTO = ("camel-tied", "camel-free", "sodm-additive", "camel-data-free", "camel-data-tied")


class Table:
    """The user's runs and the held-out runs of one real table: mixtures, sizes, tokens and targets [T, P]."""

    def __init__(self, name, train, test, mixture, targets, size="size", tokens="tokens"):
        self.name, self.mixture, self.targets = name, mixture, targets
        self.train, self.test = train.reset_index(drop=True), test.reset_index(drop=True)
        self.size = size if size in train else None
        self.tokens = tokens if tokens in train and train[tokens].nunique() > 1 else None
        self.constant_tokens = tokens in train and train[tokens].nunique() == 1

    def arrays(self, frame):
        size = frame[self.size].to_numpy(float) if self.size else None
        tokens = frame[self.tokens].to_numpy(float) if self.tokens else None
        return frame[self.mixture].to_numpy(float), size, tokens, frame[self.targets].to_numpy(float).T


def template(name: str, table: Table, key) -> object:
    r, size, tokens, _ = table.arrays(table.train)
    scale = (lambda x: float(np.exp(np.mean(np.log(x))))) if size is not None else (lambda x: 1.0)
    return law_template(name, key, n_datasets=len(table.mixture), n_domains=3, size_scale=scale(size),
                        tokens_scale=scale(tokens) if tokens is not None else 1.0, tokens=tokens is not None)


def inputs_of(law, name: str, r, size, tokens) -> tuple:
    if not LAWS[name].size:
        return (r,)
    return (r, size, tokens) if takes_tokens(law) else (r, size)


def fit_and_predict(name, table, train_rows, frame_pred, key, restarts):
    """Fit law `name` on the user's rows `train_rows` (booleans) of every target; predictions at `frame_pred` [T, Q],
    per target (converged, degenerate), and the fit."""
    law = template(name, table, key)
    r, size, tokens, Y = table.arrays(table.train)
    W = (np.isfinite(Y) & train_rows[None, :]).astype(float)
    result = cj.fit(law, inputs_of(law, name, r, size, tokens), np.where(np.isfinite(Y), Y, 1.0), weights=W,
                    key=key, restarts=restarts)  # fmt: skip
    rq, sq, tq, _ = table.arrays(frame_pred)
    pred = np.asarray(result.predict(*inputs_of(law, name, rq, sq, tq)))
    converged = np.isin(np.atleast_1d(np.asarray(result.best_status)), [Status.CONVERGED, Status.STALLED])
    ok = converged
    degenerate = []
    for t in range(Y.shape[0]):
        one = jax.tree.map(lambda leaf: leaf[t], result.law)
        degenerate.append(bool(degenerate_parameters(one, result.inputs, Y[t], W[t])))
    print(f"    {name}: best start converged on {int(converged.sum())} of {converged.size} targets, degenerate on "
          f"{int(np.sum(degenerate))}; starts converged {int(np.asarray(result.converged).sum())} of "
          f"{np.asarray(result.converged).size}", file=sys.stderr, flush=True)  # fmt: skip
    return pred, ok & ~np.array(degenerate), result


def mape(pred, y):
    ape = 100 * np.abs(pred / y - 1)
    n = np.isfinite(ape).sum(axis=-1)
    return np.nanmean(ape, axis=-1), np.nanstd(ape, axis=-1, ddof=1) / np.sqrt(n)


def choose(names, table, split, key, restarts, log):
    """Per target: the law the rule picks, fitting each candidate on the user's rows outside `split` and scoring
    on `split`; the one-standard-error rule among the usable fits (converged, not degenerate)."""
    errors, ses, usable, sizes = {}, {}, {}, {}
    held = table.train[split]
    for i, name in enumerate(names):
        t0 = time.time()
        pred, ok, result = fit_and_predict(name, table, ~split, held, jax.random.fold_in(key, i), restarts)
        errors[name], ses[name] = mape(pred, table.arrays(held)[3])
        usable[name], sizes[name] = ok, n_free_parameters(jax.tree.map(lambda leaf: leaf[0], result.law))
        log(f"  selection fit {name}: {time.time() - t0:.0f} s")
    picks = []
    for t in range(len(table.targets)):
        e = {n: float(errors[n][t]) for n in names}
        good = {n: v for n, v in e.items() if usable[n][t]} or e
        best = min(good, key=good.get)
        picks.append(simplest_within(good, sizes, best, float(ses[best][t])))
    return picks


def after_rule(table: Table, key):
    """(candidates, selection split over the user's rows) as `--law auto` chooses them now, or (None, reason)."""
    n_sizes = table.train[table.size].nunique() if table.size else 1
    if n_sizes <= 1 and table.tokens:
        return None, "one size whose tokens vary: no shipped law reads tokens without a size"
    if n_sizes <= 1:
        names = list(AUTO_MIXTURE_LAWS)
    elif table.tokens:
        names = [n for n in AUTO_LAWS if LAWS[n].tokens != "never"]
    else:
        names = [n for n in AUTO_LAWS if not n.startswith("camel-data")]
    r, size, tokens, _ = table.arrays(table.train)
    if n_sizes >= AUTO_MIN_SIZES:
        return names, size == size.max()
    if tokens is not None:
        return names, np.array([tokens[i] == tokens[size == size[i]].max() for i in range(size.size)])
    groups = np.unique(np.round(r, 9), axis=0, return_inverse=True)[1].ravel()
    n_mix = int(groups.max()) + 1
    chosen = np.asarray(jax.random.permutation(jax.random.fold_in(key, 7919), n_mix))
    return names, np.isin(groups, chosen[: max(1, int(round(AUTO_MIXTURE_SHARE * n_mix)))])


def before_rule(table: Table):
    """(candidates, split) as main chose: fewer than 4 sizes, camel-tied (None without a size column)."""
    n_sizes = table.train[table.size].nunique() if table.size else 0
    if table.size is None:
        return None, "camel-tied (main's auto below 4 sizes) needs a size column: no fit"
    if n_sizes < AUTO_MIN_SIZES:
        return ["camel-tied"], None
    names = [n for n in MAIN_AUTO if table.tokens or LAWS[n].tokens == "never"]
    size = table.arrays(table.train)[1]
    return names, size == size.max()


def band(name, table, key, restarts, resamples):
    """Percentile 95% band [T, Q] at the held-out rows of law `name`: a bootstrap of the user's rows per target (the
    same resamples for every target), warm-started from the fit's 4 best starts."""
    law = template(name, table, key)
    r, size, tokens, Y = table.arrays(table.train)
    inputs = inputs_of(law, name, r, size, tokens)
    result = cj.fit(law, inputs, Y, key=key, restarts=restarts)
    rq, sq, tq, _ = table.arrays(table.test)
    test_inputs = inputs_of(law, name, rq, sq, tq)
    warm = result.best_laws(4)
    lows, highs = [], []
    for t in range(Y.shape[0]):
        single = jax.tree.map(lambda leaf: leaf[t], result.law)
        inits = jax.tree.map(lambda leaf: leaf[t], warm)
        boot = cj.bootstrap(single, inputs, Y[t], key=key, n_resamples=resamples, inits=inits, progress=False)
        low, high = boot.prediction_interval(*test_inputs)
        lows.append(low)
        highs.append(high)
    return np.array(lows), np.array(highs)


def study(table: Table, key, restarts, resamples, log):
    log(f"{table.name}: {len(table.train)} user rows, {len(table.test)} held out, {len(table.targets)} target(s)")
    after, split_after = after_rule(table, key)
    before, split_before = before_rule(table)
    candidates = sorted(set(after or []) | set(before or []) | ({"log-linear", "dml"} if not table.size else set()))
    if not candidates:
        return None
    y_test = table.arrays(table.test)[3]
    held = {}
    for i, name in enumerate(candidates):
        t0 = time.time()
        pred, ok, _ = fit_and_predict(name, table, np.ones(len(table.train), bool), table.test,
                                      jax.random.fold_in(key, 100 + i), restarts)  # fmt: skip
        held[name] = (mape(pred, y_test)[0], pred, ok)
        log(f"  final fit {name}: {time.time() - t0:.0f} s, held-out MAPE {np.round(held[name][0], 3)}")
    picks_after = choose(after, table, split_after, key, restarts, log) if after else [None] * len(table.targets)
    if before and split_before is None:
        picks_before = before * len(table.targets)
    elif before:
        picks_before = choose(before, table, split_before, key, restarts, log)
    else:
        picks_before = [None] * len(table.targets)
    rows = []
    bands = {}
    log(f"  picks before {picks_before}, after {picks_after}")
    for which, picks in (("before", picks_before), ("after", picks_after)):
        for name in sorted({p for p in picks if p is not None}):
            if resamples and name not in bands:
                t0 = time.time()
                try:
                    bands[name] = band(name, table, jax.random.fold_in(key, 999), restarts, resamples)
                except Exception as error:  # a failed band is a missing column, not a lost study
                    log(f"  bootstrap {name} failed: {error}")
                    continue
                log(f"  bootstrap {name}: {time.time() - t0:.0f} s")
    for t, target in enumerate(table.targets):
        best = min(candidates, key=lambda n: held[n][0][t])
        row = {"table": table.name, "target": target, "best law": best, "best MAPE": held[best][0][t]}
        for which, picks in (("before", picks_before), ("after", picks_after)):
            name = picks[t]
            row[f"{which} law"] = name or "no fit"
            row[f"{which} MAPE"] = held[name][0][t] if name else np.nan
            if name in bands:
                low, high = (np.atleast_2d(b)[t] for b in bands[name])
                y = y_test[t]
                rms = np.sqrt(np.nanmean((held[name][1][t] - y) ** 2))
                row[f"{which} coverage"] = float(np.nanmean((low <= y) & (y <= high)))
                row[f"{which} halfwidth/RMS"] = float(np.mean((high - low) / 2) / rms)
        rows.append(row)
    return pd.DataFrame(rows)


def regmix_ranking(key, restarts, log):
    """RegMix's split: fit the 512 1M runs, Spearman over the 256 held-out 1M runs, per validation loss."""
    from scipy.stats import spearmanr

    train, _, test, mixture, _ = shared_data.regmix_decision()
    targets = [c for c in train.columns if c.endswith("_val_loss")]
    table = Table("regmix 512 -> 256", train, test, mixture, targets)
    names, split = after_rule(table, key)
    picks = choose(names, table, split, key, restarts, log)
    preds = {}
    for i, name in enumerate(names):
        preds[name] = fit_and_predict(name, table, np.ones(len(train), bool), test, jax.random.fold_in(key, 50 + i),
                                      restarts)[0]  # fmt: skip
    y = table.arrays(test)[3]
    rows = []
    for t, target in enumerate(targets):
        row = {"loss": target.removesuffix("_val_loss"), "auto's pick": picks[t]}
        for name in names:
            row[name] = spearmanr(preds[name][t], y[t])[0]
        row["auto"] = row[picks[t]]
        rows.append(row)
    return pd.DataFrame(rows)


def tables(which: set[str], seed: int) -> list[Table]:
    out = []
    if "dmsl" in which:
        train, test, mixture, losses = shared_data.dmsl_held_out()
        train, test = train.dropna(subset=losses), test.dropna(subset=losses)
        out.append(Table("dmsl (<=1.2B -> 2.7B)", train, test, mixture, losses))
    for name, key in (("3Mix", "3mix"), ("5Mix", "5mix"), ("2Mix", "2mix")):
        if key not in which:
            continue
        runs, mixture = shared_data.mixinglaws_runs(name)
        counts = runs.groupby("size")["train_mixture"].nunique()
        largest = counts[counts > 1].index.max()
        held = runs[runs["size"] == largest]  # every run there, the paper's optimised mixtures (id >= 900) too
        runs = runs[runs["run_id"] < 900]
        out.append(Table(f"mixinglaws {name} (-> {largest:.3g})", runs[runs["size"] < largest], held, mixture,
                         ["loss"]))  # fmt: skip
    if "regmix" in which:
        train, _, _, mixture, _ = shared_data.regmix_decision()
        targets = [c for c in train.columns if c.endswith("_val_loss")]
        rng = np.random.default_rng(seed)
        test = np.zeros(len(train), bool)
        test[rng.choice(len(train), len(train) // 4, replace=False)] = True
        out.append(Table("regmix (1M, a quarter held out)", train[~test], train[test], mixture, targets))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=16)
    parser.add_argument("--resamples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tables", default="dmsl,3mix,5mix,2mix,regmix,ranking")
    parser.add_argument("--out", default=None, help="CSV prefix for the tables")
    args = parser.parse_args()
    which = set(args.tables.split(","))
    key = jax.random.key(args.seed)

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    log(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    frames = []
    for table in tables(which, args.seed):
        frame = study(table, key, args.restarts, args.resamples, log)
        if frame is None:
            log(f"{table.name}: no candidate law (see the docstring)")
            continue
        print(frame.to_string(index=False, float_format=lambda x: f"{x:.3f}"), flush=True)
        frames.append(frame)
    if frames and args.out:
        pd.concat(frames).to_csv(f"{args.out}_heldout.csv", index=False)
    if "ranking" in which:
        ranking = regmix_ranking(key, args.restarts, log)
        print(ranking.to_string(index=False, float_format=lambda x: f"{x:.3f}"), flush=True)
        if args.out:
            ranking.to_csv(f"{args.out}_ranking.csv", index=False)
    log(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
