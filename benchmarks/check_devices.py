"""Every device, the same answer: one loss decision computed on each backend this machine has (CPU, and the GPU or
TPU when there is one), with the differences printed stage by stage and the time of each stage per device.

The decision is the loss-only stack on a simulated world (the paper's 66-run design: 11 mixtures x 6 sizes, 0.5%
noise, tied CAMEL k=2 in float64): `fit` (64 starts), `bootstrap` of the fit (warm from its 4 best starts), then
`decide_loss` at M=20 against the reference within the trained range. Each stage runs pinned to one device
(`devices=[d]` and `jax.default_device(d)`). Printed per device: seconds per stage (the first call compiles), and
against the first device: the best objective's relative difference, the largest relative difference of the
predictions at M=20 over the 66 mixtures, the pick's largest share difference, the gain's and its band's
differences, and whether the verdicts agree. Asserts nothing: CI has no accelerator; run it where one is.

Usage: python benchmarks/check_devices.py [--resamples 200] [--restarts 64]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax.experiments._design import perturbed_mixtures  # noqa: E402


def _timed(call):
    start = time.perf_counter()
    out = call()
    jax.block_until_ready(jax.tree.leaves(out))
    return out, time.perf_counter() - start


def _one_device(device, data, law, reference, args):
    times = {}
    with jax.default_device(device):
        result, times["fit (compile + run)"] = _timed(
            lambda: cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=args.restarts, devices=[device]))
        _, times["fit again"] = _timed(
            lambda: cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=args.restarts, devices=[device]))

        def boot_call():
            return cj.bootstrap(result.law, result.inputs, result.y, key=jax.random.key(1),
                                n_resamples=args.resamples, inits=result.best_laws(4), weights=result.weights,
                                devices=[device], progress=False)  # fmt: skip

        boot, times["bootstrap (compile + run)"] = _timed(boot_call)
        _, times["bootstrap again"] = _timed(boot_call)
        start = time.perf_counter()
        decision = cj.decide_loss(result, key=jax.random.key(2), size=20.0, reference=reference, bootstrap=boot)
        times["decide_loss"] = time.perf_counter() - start
        mixtures = np.asarray(data.inputs[0])
        predicted = np.asarray(result.law(jax.numpy.asarray(mixtures), jax.numpy.full(len(mixtures), 20.0)))
    return result, boot, decision, predicted, times


def _relative(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--restarts", type=int, default=64)
    args = parser.parse_args()
    world = cj.simulate.default_world(jax.random.key(0))
    reference = np.full(world.n_datasets, 1.0 / world.n_datasets)
    mixtures = perturbed_mixtures(reference)
    runs = world.runs(mixtures, [4, 5, 6, 7, 8, 10], noise=0.005, key=jax.random.key(1))
    data = world.mixture_data(runs, [c for c in runs if c.startswith("loss_")][0])
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=world.n_datasets, n_domains=2, tied=True,
                               capacity_exponent=3.0)  # fmt: skip
    devices = [jax.devices("cpu")[0]]
    if jax.default_backend() != "cpu":
        devices.append(jax.devices()[0])
    print(f"jax {jax.__version__}; devices compared: {[str(d) for d in devices]}")
    outs = {str(d): _one_device(d, data, law, reference, args) for d in devices}
    first = str(devices[0])
    r0, b0, d0, p0, _ = outs[first]
    for name, (result, boot, decision, predicted, times) in outs.items():
        print(f"\n{name}: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
        print(f"  fit: best objective {float(result.objective):.10e}, "
              f"{int(np.sum(np.asarray(result.converged)))}/{args.restarts} starts converged, problems "
              f"{list(result.problems()) or 'none'}")  # fmt: skip
        print(f"  bootstrap: {boot.summary()['n_converged']}/{args.resamples} converged")
        gain = decision.decision
        print(f"  decision: pick {np.round(decision.mixture, 4)}, verdict {decision.verdict}, gain "
              f"{gain.gain:.6g} [{gain.gain_low:.6g}, {gain.gain_high:.6g}], P(improves) {gain.p_improve:.3f}")
        if name == first:
            continue
        print(f"  against {first}: best objective {_relative(result.objective, r0.objective):.2e} relative; "
              f"predictions at M=20 {_relative(predicted, p0):.2e}; pick "
              f"{float(np.max(np.abs(decision.mixture - d0.mixture))):.2e} (largest share difference); "
              f"bootstrap objectives {_relative(boot.objectives, b0.objectives):.2e} (largest, relative); gain "
              f"{abs(gain.gain - d0.decision.gain):.2e}, band ends {abs(gain.gain_low - d0.decision.gain_low):.2e} "
              f"and {abs(gain.gain_high - d0.decision.gain_high):.2e}; "
              f"verdicts {'agree' if decision.verdict == d0.verdict else 'DIFFER'}")  # fmt: skip


if __name__ == "__main__":
    main()
