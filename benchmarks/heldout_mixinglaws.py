"""Study 10 (issue 56): the command line held out on Data Mixing Laws' 3Mix, 2Mix and 5Mix, as a user runs it.

Each table (mixinglaws_ye2024 `NAME_long.csv`: one row per checkpoint and validation domain; rows with step 'last'
and the paper's optimised mixtures, run_id >= 900, dropped as `../shared/tools/heldout_cli.py` does for 5Mix) is cut
at its largest size with more than one mixture: `camel-jax fit` on every checkpoint of the smaller sizes (the tokens
vary with the step), one target per validation domain, then the held-out rows scored:

- 3Mix: fit 70M + 160M, hold out the 32 runs at 410M (302311424 non-embedding parameters; 2 checkpoints each).
- 2Mix: 2 sizes (70M, 160M): holding out 160M leaves one size whose tokens vary; what `fit` says is printed.
- 5Mix: fit 70M-410M (26 runs each), hold out the 4 swarm runs at 1B (805736448 non-embedding parameters; one
  checkpoint each, 88 rows over the 22 domains): the rows `heldout_cli.py --only 5Mix` holds out. That tool fits
  each run's last checkpoint (`fit`'s default); `--checkpoint final` here reads the table as it does.

For each `--law` (default: `auto`, then each law `auto` considers on such a table): the law fitted (auto's choice
and its printed line are in the log), the held-out MAPE (over all held-out rows, and per domain), and, when the fit
has a bootstrap (`--resamples` > 0), `camel-jax predict`'s 95% band: its coverage of the held-out rows and its mean
half-width over the RMS relative error (`heldout_cli.py`'s score). With `--resamples 0` the predictions come from
the fit file (`FitResult.predict` at the rows read with the fit's own reader flags): no band.

`--score DIR` scores a finished `fit.npz` against `test.csv` in DIR the same way (e.g. the temporary folder that
`heldout_cli.py --resamples 0` leaves, where `predict` refuses a fit without a bootstrap).

    python benchmarks/heldout_mixinglaws.py [--table 3Mix] [--laws auto,sodm-additive,...] [--resamples 0]
        [--restarts 32] [--checkpoint all|final] [--workdir DIR] [--log FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import shared_data  # noqa: E402

# the laws `--law auto` compares on a table of 2-3 sizes whose tokens vary (`cli.fit.AUTO_LAWS` that read tokens)
TOKEN_LAWS = ("sodm-additive", "camel-data-free", "camel-data-tied", "log-linear-size")
# every checkpoint (`fit`'s default keeps each run's last: one token count per size on 2Mix and 3Mix's 70M)
FLAGS = ["--mixture", "train_mixture", "--size", "nonembedding_params", "--tokens", "tokens", "--domain",
         "valid_domain", "--step", "step", "--checkpoint", "all"]  # fmt: skip


def split(name: str) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """(training rows, held-out rows, held-out size): every checkpoint below the largest size with more than one
    mixture, and every checkpoint at it."""
    long = shared_data.mixinglaws_ye2024(name)
    long = long[long["step"].astype(str) != "last"].dropna(subset=["nonembedding_params"])
    long = long[long["run_id"] < 900]  # the paper's optimised mixtures are not part of the swarm
    counts = long.groupby("nonembedding_params")["train_mixture"].nunique()
    largest = float(counts[counts > 1].index.max())
    return long[long["nonembedding_params"] < largest], long[long["nonembedding_params"] == largest], largest


def cli(args: list[str], cwd: Path, log) -> tuple[int, str]:
    """`camel-jax ARGS` in `cwd` (this checkout's code first on the path); its output to the log."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    run = subprocess.run([sys.executable, "-m", "camel_jax", *args], cwd=cwd, capture_output=True, text=True, env=env)
    log(f"$ camel-jax {' '.join(args)}   ({time.time() - t0:.0f} s, exit {run.returncode})")
    text = run.stdout + run.stderr
    log("\n".join(line for line in text.splitlines() if not line.startswith("\r")))
    return run.returncode, text


def score_file(fit: Path, rows: Path) -> pd.DataFrame:
    """The fit's predictions at `rows` (read with the fit's own reader flags), one row per held-out point and
    target: `target`, `observed`, `predicted` (no band: the fit file's point predictions)."""
    from camel_jax.cli._common import read_table
    from camel_jax.io._save import load, saved_reader

    saved = load(fit)
    options = {key: value for key, value in (saved_reader(fit) or {}).items() if value is not None}
    data = read_table(argparse.Namespace(csv=[str(rows)]), **options)
    predicted = np.atleast_2d(np.asarray(saved.predict(*data.inputs[: len(saved.inputs)])))
    y, w = np.atleast_2d(np.asarray(data.y)), np.atleast_2d(np.asarray(data.weight))
    targets = list(saved.targets) if saved.targets is not None else ["loss"]
    frames = [pd.DataFrame({"target": name, "observed": y[t][w[t] > 0], "predicted": predicted[t][w[t] > 0]})
              for t, name in enumerate(targets)]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def summary(points: pd.DataFrame) -> dict[str, float]:
    """MAPE (%) over every point and per target; with a band, its coverage and half-width over the RMS error."""
    rel = (points["predicted"] - points["observed"]) / points["observed"]
    out = {"MAPE": 100 * float(np.mean(np.abs(rel))), "rows": len(points)}
    if "lower" in points:
        inside = (points["lower"] <= points["observed"]) & (points["observed"] <= points["upper"])
        half = (points["upper"] - points["lower"]) / 2 / points["observed"]
        out |= {"coverage": float(inside.mean()), "halfwidth/RMS": float(half.mean() / np.sqrt(np.mean(rel**2)))}
    for name, group in points.groupby("target", sort=False):
        out[str(name)] = 100 * float(np.mean(np.abs(group["predicted"] / group["observed"] - 1)))
    return out


def degenerate_share(fit: Path) -> str:
    """'n/T': the targets whose best law has a parameter that is a limit, not an estimate (`FitResult.degenerate`,
    which the fit's .json leaves empty for several targets)."""
    from camel_jax.io._save import load

    saved = load(fit)
    found = saved.degenerate()
    n = saved.n_targets or 1
    hit = {name.split(":")[0] for name in found} if saved.n_targets else ({"all"} if found else set())
    return f"{len(hit)}/{n}"


def held_out(law: str, folder: Path, resamples: int, restarts: int, log, flags: list[str] = FLAGS) -> dict[str, object]:
    """`fit --law LAW` on train.csv in `folder`, then the held-out rows scored (by `predict` when the fit has a
    bootstrap)."""
    prefix = f"fit_{law}"
    t0 = time.time()
    code, text = cli(["fit", "train.csv", *flags, "--law", law, "--resamples", str(resamples), "--restarts",
                      str(restarts), "--out", prefix], folder, log)  # fmt: skip
    if code != 0:
        return {"law": law, "fitted": f"exit {code}: {text.strip().splitlines()[-1]}"}
    fitted = json.loads((folder / f"{prefix}.json").read_text())
    statuses = fitted["best_status"] if isinstance(fitted["best_status"], list) else [fitted["best_status"]]
    row: dict[str, object] = {"law": law, "fitted": fitted["law_name"],
                              "converged": f"{sum(s in ('converged', 'stalled') for s in statuses)}/{len(statuses)}"}
    row |= {"degenerate": degenerate_share(folder / f"{prefix}.npz"), "fit_s": round(time.time() - t0)}
    if resamples > 0:
        code, text = cli(["predict", f"{prefix}.npz", "test.csv", "--out", f"pred_{law}.csv"], folder, log)
        if code != 0:
            return row | {"predict": f"exit {code}: {text.strip().splitlines()[-1]}"}
        pred = pd.read_csv(folder / f"pred_{law}.csv")
        points = pred.rename(columns={"loss": "observed"})
    else:
        points = score_file(folder / f"{prefix}.npz", folder / "test.csv")
    return row | summary(points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default="3Mix", choices=("3Mix", "2Mix", "5Mix"))
    parser.add_argument("--laws", default=",".join(("auto", *TOKEN_LAWS)))
    parser.add_argument("--resamples", type=int, default=0)
    parser.add_argument("--restarts", type=int, default=32)
    parser.add_argument("--checkpoint", default="all", help="fit's --checkpoint: all (default: every checkpoint, "
                        "the tokens vary with the step) or final (each run's last, as heldout_cli.py)")  # fmt: skip
    parser.add_argument("--workdir", default=None, help="where train.csv, test.csv and the fits go (default: a "
                        "new temporary folder, kept)")  # fmt: skip
    parser.add_argument("--log", default=None, help="also append every command's output to this file")
    parser.add_argument("--score", default=None, help="score DIR/fit.npz on DIR/test.csv and stop")
    args = parser.parse_args()

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)
        if args.log:
            with open(args.log, "a") as f:
                f.write(text + "\n")

    if args.score:
        points = score_file(Path(args.score) / "fit.npz", Path(args.score) / "test.csv")
        print(json.dumps(summary(points), indent=1))
        return
    folder = Path(args.workdir or tempfile.mkdtemp(prefix=f"heldout_{args.table}_"))
    folder.mkdir(parents=True, exist_ok=True)
    train, test, largest = split(args.table)
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    sizes = sorted(train["nonembedding_params"].unique())
    log(f"{args.table}: fit on sizes {[f'{s:.4g}' for s in sizes]} ({len(train)} rows), hold out {largest:.4g} "
        f"({test['run_id'].nunique()} runs, {len(test)} rows); folder {folder}; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    flags = [*FLAGS[:-1], args.checkpoint]
    rows = []
    for law in args.laws.split(","):
        rows.append(held_out(law, folder, args.resamples, args.restarts, log, flags))
        log(f"row: {json.dumps(rows[-1])}")
    table = pd.DataFrame(rows)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"), flush=True)
    log(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
