"""`camel-jax predict fit.npz rows.csv --out pred.csv`: a saved fit's predictions at new rows, with their 95% band
(the fit's bootstrap, widened by its calibration past the largest trained size and outside the trained tokens), and,
when the rows hold the target, the held-out error and the band's coverage. With a calibration, a column `calibrated`
says per row whether its band is (False: the row lies outside the trained tokens in a direction the calibration
could not measure; one printed line says how many and why)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import UserError, _check_destination, _read_csv, _write_outputs, say_problems
from ._names import DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast

# The columns `predict` adds to the rows (a fit of several targets read from a wide table: one of each per target).
PREDICTION_COLUMNS = ("predicted", "lower", "upper")
# With a calibration, this column says whether each row's band is calibrated (see `uncalibrated_rows`).
CALIBRATED_COLUMN = "calibrated"
# For a law with term variables (CAMEL's <t_i, r>), this column says whether each row lies within the fit's support
# (`FitResult.outside_support`); outside it the row gets no prediction.
SUPPORTED_COLUMN = "supported"


def add_parser(sub: Any) -> None:
    pred = sub.add_parser("predict", help="a saved fit's predictions at new rows, with their 95%% band -> CSV")
    pred.add_argument("saved", help="a .npz written by `camel-jax fit`")
    pred.add_argument("rows", help="a CSV of runs, with the columns the fit was made from (the target is optional: "
                      "when present, the held-out error and the band's coverage are printed)")  # fmt: skip
    pred.add_argument("--out", default=None, help="the CSV to write: the rows plus predicted, lower, upper "
                      "(default: print the first rows only)")  # fmt: skip
    pred.add_argument("--level", type=float, default=0.95, help="the band's coverage (default 0.95)")


def fit_columns(path: str, saved: Any) -> dict[str, Any]:
    """The column names a fit was made from, as `camel-jax fit` stores them in its file (`read_metadata`):
    mixture, size, tokens, target (a name, or a list for several targets), domain (a long table's validation-domain
    column) and targets (the fit's target names, in its order). A file without them (written by `save` from Python)
    names its mixture columns only, when the fit knows them."""
    from ..io._save import read_metadata

    columns = dict(read_metadata(path).get("columns", {}))
    if not columns.get("mixture") and saved.names is not None:
        columns["mixture"] = list(saved.names)
    return columns


def target_names(path: str, saved: Any) -> list[str] | None:
    """The names of a fit's targets in its order (None for a fit of one target): the fit's own `targets`, else the
    file's record of them; "target 0", ... when neither holds them."""
    if saved.n_targets is None:
        return None
    if saved.targets is not None and len(saved.targets) == saved.n_targets:  # the fit's own (`FitResult.targets`)
        return [str(n) for n in saved.targets]
    names = fit_columns(path, saved).get("targets")
    if isinstance(names, list) and len(names) == saved.n_targets:
        return [str(n) for n in names]
    return [f"target {t}" for t in range(saved.n_targets)]


def read_rows(df: Any, columns: dict[str, Any], saved: Any, where: str) -> tuple[tuple[Any, ...], Any, Any]:
    """The law's inputs at the rows of `df`, read by the fit's column names: (inputs, target index per row [P] (a
    long table of several targets, by its domain column; None otherwise), the observed targets [P] or [T, P] (None
    when the rows do not hold them)). A missing column is a `UserError` naming it.

    The one place `predict` reads rows: the reader (`read_runs`) can stand in for it."""
    from ..data._containers import positive_columns

    mixture = columns.get("mixture")
    if not mixture:
        raise UserError(f"{where}: the fit does not record its mixture columns: refit it with `camel-jax fit`")
    missing = [c for c in mixture if c not in df.columns]
    if missing:
        raise UserError(f"the rows have no mixture column {missing[0]!r} (the fit's: {list(mixture)})")
    r = df[list(mixture)].to_numpy(float)
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        row = int(np.flatnonzero(~np.all(np.isfinite(r) & (r >= 0), axis=1))[0])
        raise UserError(f"row {row}: the mixture shares must be finite numbers >= 0")
    off = np.flatnonzero(np.abs(r.sum(axis=1) - 1) > 1e-6)
    if len(off):
        raise UserError(f"row {int(off[0])}: the mixture shares sum to {r[off[0]].sum():.6g}, not 1")
    roles: dict[str, str] = {}
    n_inputs = len(saved.inputs)
    for role, index in (("size", 1), ("tokens", 2)):
        if n_inputs > index:
            name = columns.get(role) or role
            if name not in df.columns:
                raise UserError(f"the rows have no {role} column {name!r}, which the fit's law takes")
            roles[role] = name
    inputs: tuple[Any, ...] = (r,)
    if roles:
        try:
            values = positive_columns(df, roles)
        except ValueError as error:
            raise UserError(str(error)) from None
        inputs += tuple(np.asarray(values[role], float) for role in ("size", "tokens") if role in values)
    which = None
    target = columns.get("target")
    if saved.n_targets is not None and columns.get("domain"):
        domain = columns["domain"]
        if domain not in df.columns:
            raise UserError(f"the rows have no domain column {domain!r}: a long table names each row's target")
        names = target_names(where, saved) or []
        labels = df[domain].astype(str).tolist()
        unknown = sorted(set(labels) - set(names))
        if unknown:
            raise UserError(f"the rows name domain(s) {unknown[:3]} that the fit has no target for ({names[:5]}...)")
        which = np.array([names.index(v) for v in labels])
    observed = None
    if isinstance(target, str) and target in df.columns:
        observed = df[target].to_numpy(float)
    elif isinstance(target, list) and target and all(t in df.columns for t in target):
        observed = np.stack([df[t].to_numpy(float) for t in target])
    return inputs, which, observed


def run(args: argparse.Namespace) -> None:

    from ..fitting._fit import FitResult
    from ..io._save import load

    if not Path(args.saved).is_file():
        raise UserError(f"no such file: {args.saved}")
    if not 0 < args.level < 1:
        raise UserError(f"--level must be in (0, 1); got {args.level:g}")
    if args.out:
        _check_destination(Path(args.out))
    saved = load(args.saved)
    if not isinstance(saved, FitResult):
        raise UserError(f"{args.saved} holds a {type(saved).__name__}; `predict` reads a fit (`camel-jax fit`)")
    if saved.bootstrap is None:
        raise UserError(f"{args.saved} holds no bootstrap, so its predictions would have no band: refit with "
                        "`camel-jax fit --resamples 200`")  # fmt: skip
    from ..io._save import saved_reader

    reader = saved_reader(args.saved)
    if reader is not None:  # a file `camel-jax fit` wrote: the rows are read as the fit's runs were
        _predict_read(args, saved, reader)
        return
    df = _read_csv(args.rows)
    inputs, which, observed = read_rows(df, fit_columns(args.saved, saved), saved, args.saved)
    say_problems(args.saved, saved.problems() + saved.bootstrap_problems())
    predicted, lower, upper = saved.prediction_band(*inputs, level=args.level)
    outside = saved.outside_support(inputs[0])
    predicted, lower, upper = _without_outside((predicted, lower, upper), outside)
    flagged = uncalibrated_rows(saved, inputs)
    out = df.copy()
    names = target_names(args.saved, saved)
    one_column = names is None or which is not None
    if names is None or which is not None:  # (spelled out: mypy narrows `names` by it)
        pick = (lambda a: a) if which is None else (lambda a: a[which, np.arange(a.shape[1])])
        for column, values in zip(PREDICTION_COLUMNS, (predicted, lower, upper)):
            out[column] = pick(values)
        if observed is not None and which is not None:
            observed = observed if observed.ndim == 1 else observed[which, np.arange(observed.shape[1])]
    else:  # a wide table of several targets: one prediction and band per target
        for t, name in enumerate(names):
            for column, values in zip(PREDICTION_COLUMNS, (predicted, lower, upper)):
                out[f"{column}_{name}"] = values[t]
            if outside is not None:
                out[f"{SUPPORTED_COLUMN}_{name}"] = ~outside[t]
    if outside is not None and one_column:
        outside = outside if which is None else outside[which, np.arange(outside.shape[1])]  # each row's target
        out[SUPPORTED_COLUMN] = ~outside
    _warn_outside(outside, None if one_column else names)
    if flagged is not None:
        out[CALIBRATED_COLUMN] = ~flagged
        _warn_uncalibrated(out, saved, saved.calibration.tokens_of(inputs))
    if one_column:
        _held_out(out, observed, args.level, saved.calibration is not None)
    _write_or_show(out, args.out)


def _predict_read(args: argparse.Namespace, saved: Any, reader: dict[str, Any]) -> None:
    """`predict` on a file `camel-jax fit` wrote: the rows are read by `read_runs` with the fit's own reader flags
    (a long table, a column of shares, checkpoints: as the fit read them), and written one row per point and
    target: the mixture by dataset name, size and tokens, `target` (for several targets), the observed value under
    the fit's target column name (when the rows hold it), and `predicted`, `lower`, `upper`."""
    import pandas as pd

    from ._common import read_table

    options = {key: value for key, value in reader.items() if value is not None}
    header = set(map(str, _read_csv(args.rows).columns))
    if options.get("mixture") is None and saved.names is not None:  # the fit's mixture columns, by name
        missing = [name for name in saved.names if name not in header]
        if missing:
            raise UserError(f"the rows have no mixture column {missing[0]!r} (the fit's: {list(saved.names)})")
    data = read_table(argparse.Namespace(csv=[args.rows]), **options)
    names = list(saved.names) if saved.names is not None else list(data.columns)
    if list(data.columns) != names:
        raise UserError(f"the rows' datasets {list(data.columns)} are not the fit's {names}")
    targets = list(saved.targets) if saved.targets is not None else list(data.targets) or ["loss"]
    if saved.n_targets is not None and list(data.targets) != targets:
        raise UserError(f"the rows' targets {list(data.targets)} are not the fit's {targets}")
    inputs = data.inputs[: len(saved.inputs)]
    _check_sizes(args, data, len(inputs))
    say_problems(args.saved, saved.problems() + saved.bootstrap_problems())
    band = saved.prediction_band(*inputs, level=args.level)
    outside = saved.outside_support(inputs[0])
    predicted, lower, upper = (np.atleast_2d(a) for a in _without_outside(band, outside))
    outside = None if outside is None else np.atleast_2d(outside)
    flagged = uncalibrated_rows(saved, inputs)
    y, w = np.atleast_2d(np.asarray(data.y)), np.atleast_2d(np.asarray(data.weight))
    frames = []
    column = reader.get("target") if isinstance(reader.get("target"), str) and "*" not in reader["target"] else "loss"
    for t, name in enumerate(targets):
        keep = w[t] > 0
        frame = pd.DataFrame(np.asarray(data.r)[keep], columns=names)
        for role, values in (("size", data.size), ("tokens", data.tokens)):
            if values is not None:
                frame[role] = np.asarray(values)[keep]
        if saved.n_targets is not None:
            frame["target"] = name
        frame[column] = y[t][keep]
        for label, values in zip(PREDICTION_COLUMNS, (predicted, lower, upper)):
            frame[label] = values[t][keep]
        if flagged is not None:
            frame[CALIBRATED_COLUMN] = ~flagged[keep]
        if outside is not None:
            frame[SUPPORTED_COLUMN] = ~outside[t][keep]
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    _warn_outside(None if outside is None else np.where(w > 0, outside, False), targets if len(targets) > 1 else None)
    if flagged is not None and saved.calibration.tokens_index is not None:
        _warn_uncalibrated(out, saved, np.concatenate([np.asarray(inputs[saved.calibration.tokens_index])[w[t] > 0]
                                                       for t in range(len(targets))]))  # fmt: skip
    _held_out(out, out[column].to_numpy(float), args.level, saved.calibration is not None)
    _write_or_show(out, args.out)


def _check_sizes(args: argparse.Namespace, data: Any, n_inputs: int) -> None:
    """A law that reads no model size (a law of the mixture) predicts at the sizes it was fitted on only: rows at
    another size are refused in one line, before any compute (2Mix: log-linear fitted at 70M 'predicted' the 160M
    runs at 15% error, silently)."""
    from ..io._save import read_metadata

    trained = read_metadata(args.saved).get("trained_sizes")
    if n_inputs > 1 or data.size is None or not isinstance(trained, list) or not trained:
        return
    size, known = np.asarray(data.size, dtype=float), np.asarray(trained, dtype=float)
    other = ~np.isclose(size[:, None], known[None, :], rtol=1e-9, atol=0.0).any(axis=1)
    if other.any():
        raise UserError(
            f"{int(other.sum())} of {other.size} rows are at a model size the fit was not made at "
            f"({size[other][0]:.4g}; fitted at {', '.join(f'{s:.4g}' for s in known)}): its law reads no size, so it "
            "predicts at those sizes only; fit a law of size on runs at 2 sizes or more to predict at another"
        )


def _without_outside(band: tuple[Any, ...], outside: Any) -> tuple[Any, ...]:
    """The band's arrays with NaN (no prediction) where a row lies outside the fit's support (`outside`, [P] or
    [T, P] booleans; None: the law has no term variables, every row kept)."""
    arrays = tuple(np.array(a, dtype=float) for a in band)
    if outside is not None:
        for a in arrays:
            a[np.broadcast_to(outside, a.shape)] = np.nan
    return arrays


def _warn_outside(outside: Any, names: list[str] | None) -> None:
    """One printed line when some rows lie outside the fit's support (`outside` [P] or [T, P]): how many, the first
    (row and target), and why they have no prediction."""
    if outside is None or not np.any(outside):
        return
    outside = np.atleast_2d(outside)
    t, row = (int(i[0]) for i in np.nonzero(outside))
    first = f"row {row}" + (f" of {names[t]}" if names is not None and outside.shape[0] > 1 else "")
    print(f"warning: {int(outside.any(axis=0).sum())} of {outside.shape[1]} rows lie outside the fit's support (the "
          f"first: {first}): a term's mixture variable (CAMEL's <t_i, r>) below a tenth of its smallest value over "
          "the fitted runs, where the law's power-law terms extrapolate without limit; no prediction there "
          f"(predicted, lower, upper empty; {SUPPORTED_COLUMN} = False): add runs near those mixtures, or use a law "
          "without such terms (log-linear)")  # fmt: skip


def uncalibrated_rows(saved: Any, inputs: tuple[Any, ...]) -> Any:
    """[P] bool, the points whose band the fit's calibration does not calibrate (outside the trained tokens in a
    direction no held-out cell measured: `Calibration.uncalibrated`); None for a fit without a calibration."""
    cal = saved.calibration
    if cal is None:
        return None
    return np.broadcast_to(cal.uncalibrated(cal.tokens_of(inputs)), np.shape(inputs[0])[:1]).copy()


def _warn_uncalibrated(out: Any, saved: Any, tokens: Any) -> None:
    """One printed line when some rows of `out` (its `calibrated` column; `tokens` [rows]) have a band that is not
    calibrated: how many, the trained tokens range and on which side they lie."""
    if CALIBRATED_COLUMN not in out:
        return
    flagged = ~out[CALIBRATED_COLUMN].to_numpy(bool)
    if not flagged.any():
        return
    low, high = saved.calibration.tokens_range
    D = np.asarray(tokens, float)[flagged]
    side = ("fewer" if D.max() < low else "more" if D.min() > high else "fewer or more") + " tokens"
    print(f"warning: {int(flagged.sum())} of {len(flagged)} rows lie outside the trained tokens [{low:.4g}, "
          f"{high:.4g}] ({side}), an extrapolation no held-out fold measured: their band counts the tokens' "
          f"distance at the size's error per unit and is not calibrated ({CALIBRATED_COLUMN} = False); fit runs "
          "or checkpoints at those tokens (`--checkpoint all`) to bring them inside")  # fmt: skip


def _write_or_show(out: Any, path: str | None) -> None:
    """The predictions to `path` (all or nothing), or their first rows on the screen without --out."""
    import pandas as pd

    if path:
        _write_outputs({Path(path): lambda f: out.to_csv(f, index=False)})
        print(f"wrote {path} ({len(out)} rows)")
    else:
        with pd.option_context("display.width", 160, "display.max_columns", 12):
            print(out.head(10).to_string())


def _held_out(out: Any, observed: Any, level: float, calibrated: bool) -> None:
    """When the rows hold the target: the held-out MAPE and the band's coverage, one line."""
    if observed is None:
        return
    y = np.asarray(observed, float)
    ok = np.isfinite(y) & (y != 0)
    predicted = np.isfinite(out["predicted"].to_numpy(float))  # a row outside the fit's support has none
    unsupported = int(np.sum(ok & ~predicted))
    ok &= predicted
    if not ok.any():
        return
    p, lo, hi = (out[c].to_numpy(float)[ok] for c in PREDICTION_COLUMNS)
    mape = 100 * float(np.mean(np.abs((p - y[ok]) / y[ok])))
    inside = (lo <= y[ok]) & (y[ok] <= hi)
    cover = float(np.mean(inside))
    note = "calibrated past the trained sizes" if calibrated else "not calibrated past the trained sizes"
    if calibrated and CALIBRATED_COLUMN in out and not out[CALIBRATED_COLUMN].to_numpy(bool)[ok].all():
        good = out[CALIBRATED_COLUMN].to_numpy(bool)[ok]
        note = (f"not calibrated for the {int((~good).sum())} rows outside the trained tokens" if not good.any() else
                f"calibrated for {int(good.sum())} rows, covering {float(np.mean(inside[good])):.0%} of them; not for "
                f"the {int((~good).sum())} outside the trained tokens")  # fmt: skip
    note += "; with the fit's run-to-run scatter"
    if unsupported:
        note += f"; {unsupported} rows outside the fit's support have no prediction and are not scored"
    print(f"held-out: MAPE {mape:#.4g}% over {int(ok.sum())} rows; the {level:.0%} band covers {cover:.0%} of them "
          f"({note})")  # fmt: skip
