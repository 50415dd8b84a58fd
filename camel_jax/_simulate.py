"""A ground-truth world built on the CAMEL paper's capacity-allocation problem, solved exactly.

Training on mixture r with capacity m(M) allocates capacity m_i to k intrinsic domains by minimizing the training
loss (paper eq. opt-train-prob):

    min_m  sum_i eta_i(r) (C_i + A_i / m_i^a_i)   s.t.  sum_i m_i = m(M),   eta_i(r) = <t_i, r>.

The KKT conditions give m_i = (a_i A_i eta_i / lam)^(1/(a_i+1)) with lam > 0 fixed by the budget, a monotone
1-D equation solved here by bisection on log lam to machine precision (not the theorem's approximation). Validation
set v then has loss C_v + sum_i w_vi A_i / m_i^a_i (paper eq. val_loss_model), and benchmark b has accuracy
C_b + A_b sigmoid(-(k_b . L + B_b)) of the validation losses L (the loss-to-benchmark law).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike, Float

from ._io import BenchmarkData, MixtureData

# Paper Appendix "Details of Model Architectures": at scale index M, M layers, hidden 112 M, expert FFN width 32 M,
# 8 routed + 1 shared experts active. Active non-embedding parameters per layer: attention 4 h^2 plus
# 9 experts x 3 h x 32 M, i.e. (4 * 112^2 + 9 * 3 * 112 * 32) M^2 = 146,944 M^2; times M layers.
# This gives 12M active at M=4 and 1.2B at M=20, the paper's 590M-A12M and 55B-A1.2B.
PAPER_PARAMS_PER_M3 = 146_944.0


def paper_active_params(scale: ArrayLike) -> Array:
    """Active non-embedding parameters of the paper's architecture at scale index M (about 1.47e5 M^3)."""
    return PAPER_PARAMS_PER_M3 * jnp.asarray(scale) ** 3


BENCHMARKS = ("mmlu", "arc_c", "bbh", "gsm8k", "math", "humaneval", "ceval")
DATASETS = ("english", "chinese", "code", "math", "knowledge")


def _solve_log_lambda(log_x: Array, a: Array, log_capacity: Array) -> Array:
    """Root of g(l) = sum_i exp((log_x_i - l) / (a_i + 1)) - capacity, decreasing in l.

    At l = max_i(log_x_i - (a_i+1) log cap) one term alone reaches the capacity (g >= 0); at
    l = max_i(log_x_i - (a_i+1) log(cap / k)) every term is at most cap / k (g <= 0). Bisection then halves the
    bracket to machine precision.
    """
    k = log_x.shape[-1]
    lo = jnp.max(log_x - (a + 1) * log_capacity)
    hi = jnp.max(log_x - (a + 1) * (log_capacity - np.log(k)))

    def g(l):
        return jnp.sum(jnp.exp((log_x - l) / (a + 1))) - jnp.exp(log_capacity)

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        positive = g(mid) > 0
        return jnp.where(positive, mid, lo), jnp.where(positive, hi, mid)

    lo, hi = jax.lax.fori_loop(0, 200, bisect, (lo, hi))
    root = jax.lax.stop_gradient(0.5 * (lo + hi))
    # One Newton step from the (stopped) root: the value is unchanged to rounding, and derivatives with respect
    # to log_x and the capacity are exact (implicit function theorem), where bisection's would be zero.
    return root - g(root) / jax.grad(g)(root)


class World(eqx.Module):
    """A simulated world: intrinsic domains, validation sets and benchmarks with known parameters.

    **Fields**: `t` [k, n] dataset profiles (columns on the simplex), `a`, `A`, `C` [k] domain power laws,
    `w` [V, k] validation-set weights over domains, `C_val` [V], `bench_k` [B, V], `bench_A`, `bench_B`,
    `bench_C` [B] logistic maps; `capacity` maps the model size M to capacity (static); names of the datasets,
    validation sets and benchmarks (static).
    """

    t: Float[Array, "k n"]
    a: Float[Array, " k"]
    A: Float[Array, " k"]
    C: Float[Array, " k"]
    w: Float[Array, "V k"]
    C_val: Float[Array, " V"]
    bench_k: Float[Array, "B V"]
    bench_A: Float[Array, " B"]
    bench_B: Float[Array, " B"]
    bench_C: Float[Array, " B"]
    capacity: Callable[[Array], Array] = eqx.field(static=True)
    datasets: tuple[str, ...] = eqx.field(static=True)
    validation_sets: tuple[str, ...] = eqx.field(static=True)
    benchmarks: tuple[str, ...] = eqx.field(static=True)

    @property
    def n_datasets(self) -> int:
        return int(self.t.shape[1])

    def allocation(self, r: Float[Array, " n"], size: Float[Array, ""]) -> Float[Array, " k"]:
        """Exact optimal capacity allocation m* for one mixture and size (the KKT solution)."""
        eta = self.t @ r
        log_x = jnp.log(self.a * self.A * eta)
        log_lam = _solve_log_lambda(log_x, self.a, jnp.log(self.capacity(size)))
        return jnp.exp((log_x - log_lam) / (self.a + 1))

    def _reducible(self, r: Array, size: Array) -> Array:
        m = jax.vmap(self.allocation)(r, size)  # [P, k]
        return self.A[None, :] * jnp.exp(-self.a[None, :] * jnp.log(m))

    def train_loss(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Float[Array, " P"]:
        eta = r @ self.t.T
        return jnp.sum(eta * (self.C[None, :] + self._reducible(r, size)), axis=1)

    def losses(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Float[Array, "P V"]:
        """Validation losses of every validation set, [P, V]."""
        return self.C_val[None, :] + self._reducible(r, size) @ self.w.T

    def accuracies(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Float[Array, "P B"]:
        L = self.losses(r, size)
        return self.bench_C[None, :] + self.bench_A[None, :] * jax.nn.sigmoid(
            -(L @ self.bench_k.T + self.bench_B[None, :])
        )

    def objective(self, r: Float[Array, " n"], size: float | Array, weights: dict[str, float]) -> Array:
        """True weighted benchmark accuracy sum_b w_b Acc_b(r, M) of one mixture."""
        return self.true_objective(size, weights)(r)

    def true_objective(self, size: float | Array, weights: dict[str, float]) -> TrueObjective:
        """The true objective at one size as a callable module: `optimal_mixture(world.true_objective(20.0, w),
        5, key=key)` gives the true optimal mixture, and a new size reuses the compiled program."""
        w = jnp.asarray([float(weights.get(b, 0.0)) for b in self.benchmarks])
        return TrueObjective(self, jnp.asarray(size, dtype=w.dtype), w)

    def runs(
        self,
        mixtures: ArrayLike,
        sizes: Sequence[float],
        *,
        tokens: float = 20e9,
        noise: float = 0.0,
        key: Array | None = None,
        params_fn: Callable[[Array], Array] = paper_active_params,
    ) -> pd.DataFrame:
        """The runs table: every mixture at every size, with losses, accuracies, parameters, tokens and FLOPs.

        `noise` is a relative Gaussian noise on losses (and an absolute one of the same size on accuracies),
        drawn from `key`. FLOPs are 6 N D with N the active parameters (`params_fn`) and D `tokens`.
        """
        mixture_rows = np.asarray(mixtures, dtype=float)
        sizes_arr = np.asarray(sizes, dtype=float)
        r = np.tile(mixture_rows, (len(sizes_arr), 1))
        M = np.repeat(sizes_arr, len(mixture_rows))
        L, acc = (np.asarray(x) for x in _losses_and_accuracies(self, jnp.asarray(r), jnp.asarray(M)))
        if noise > 0:
            if key is None:
                raise ValueError("`noise` > 0 needs a `key`")
            k1, k2 = jax.random.split(key)
            L = L * (1 + noise * np.asarray(jax.random.normal(k1, L.shape)))
            acc = acc + noise * np.asarray(jax.random.normal(k2, acc.shape))
        N = np.asarray(params_fn(jnp.asarray(M)))
        table = {f"r_{d}": r[:, j] for j, d in enumerate(self.datasets)}
        table |= {"mixture": np.tile(np.arange(len(mixture_rows)), len(sizes_arr)), "size": M, "params": N}
        table |= {"tokens": np.full(len(M), tokens), "flops": 6.0 * N * tokens}
        table |= {f"loss_{v}": L[:, i] for i, v in enumerate(self.validation_sets)}
        table |= {f"acc_{b}": acc[:, i] for i, b in enumerate(self.benchmarks)}
        return pd.DataFrame(table)

    def mixture_data(self, runs: pd.DataFrame, target: str, **kwargs: Any) -> MixtureData:
        """A runs table as `MixtureData` for one loss column (size = scale index M)."""
        return MixtureData.from_frame(
            runs, mixture=[f"r_{d}" for d in self.datasets], target=target, size="size", group="mixture", **kwargs
        )

    def benchmark_data(self, runs: pd.DataFrame, benchmark: str) -> BenchmarkData:
        return BenchmarkData.from_frame(
            runs, losses=[f"loss_{v}" for v in self.validation_sets], target=f"acc_{benchmark}"
        )


@eqx.filter_jit
def _losses_and_accuracies(world: World, r: Array, size: Array) -> tuple[Array, Array]:
    return world.losses(r, size), world.accuracies(r, size)


class TrueObjective(eqx.Module):
    """r -> sum_b w_b Acc_b(r, M) of a `World` at one size (arrays traced, so sizes share one compilation)."""

    world: World
    size: Array
    weights: Array

    def __call__(self, r: Float[Array, " n"]) -> Array:
        acc = self.world.accuracies(r[None, :], jnp.reshape(self.size, (1,)).astype(r.dtype))[0]
        return jnp.dot(self.weights, acc)


def default_world(key: Array, *, n_domains: int = 3, n_validation: int = 4, capacity_exponent: float = 3.0) -> World:
    """A random world with the paper's five datasets and seven benchmarks.

    Domain exponents a_i are near 0.35 (the theorem's near-homogeneous assumption), capacity grows as
    M^capacity_exponent (in units of the capacity at M=1), each dataset is a mix of intrinsic domains, and
    benchmarks map a positive combination of validation losses through a logistic with chance-level floors.
    """
    keys = jax.random.split(key, 9)
    n, V, B = len(DATASETS), n_validation, len(BENCHMARKS)
    t = jax.random.dirichlet(keys[0], jnp.full(n_domains, 0.7), (n,)).T
    a = 0.35 + 0.08 * jax.random.uniform(keys[1], (n_domains,), minval=-1.0, maxval=1.0)
    A = jnp.exp(jax.random.uniform(keys[2], (n_domains,), minval=np.log(0.5), maxval=np.log(2.0)))
    C = jax.random.uniform(keys[3], (n_domains,), minval=1.0, maxval=2.0)
    w = jax.random.dirichlet(keys[4], jnp.full(n_domains, 0.8), (V,))
    C_val = jax.random.uniform(keys[5], (V,), minval=1.5, maxval=2.5)
    bench_k = 3.0 * jax.random.dirichlet(keys[6], jnp.full(V, 0.6), (B,))
    bench_C = jnp.array([0.25, 0.25, 0.2, 0.0, 0.0, 0.0, 0.25])  # chance levels (multiple choice vs generative)
    bench_A = (1.0 - bench_C) * jax.random.uniform(keys[7], (B,), minval=0.6, maxval=0.95)
    # centre each sigmoid at the benchmark's proxy loss of a mid-size model on a uniform mixture
    probe = World(
        t,
        a,
        A,
        C,
        w,
        C_val,
        bench_k,
        bench_A,
        jnp.zeros(B),
        bench_C,
        lambda m: m**capacity_exponent,
        DATASETS,
        tuple(f"val{v}" for v in range(V)),
        BENCHMARKS,
    )
    L_mid = probe.losses(jnp.full((1, n), 1.0 / n), jnp.array([14.0]))[0]
    bench_B = -(bench_k @ L_mid) + 0.3 * jax.random.normal(keys[8], (B,))
    return eqx.tree_at(lambda world: world.bench_B, probe, bench_B)
