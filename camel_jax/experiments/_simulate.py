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

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike, Float

from .._deprecated import warn_renamed
from ..data._containers import BenchmarkData, MixtureData

# Paper Appendix "Details of Model Architectures": at scale index M, M layers, hidden 112 M, expert FFN width 32 M,
# 8 routed + 1 shared experts active. Active non-embedding parameters per layer: attention 4 h^2 plus
# 9 experts x 3 h x 32 M, i.e. (4 * 112^2 + 9 * 3 * 112 * 32) M^2 = 146,944 M^2; times M layers.
# This gives 12M active at M=4 and 1.2B at M=20, the paper's 590M-A12M and 55B-A1.2B.
PAPER_PARAMS_PER_M3 = 146_944.0


def paper_active_params(scale: ArrayLike) -> Array:
    """Active non-embedding parameters of the paper's architecture at scale index M (about 1.47e5 M^3)."""
    return PAPER_PARAMS_PER_M3 * jnp.asarray(scale) ** 3


# The paper's cooldown: 20B tokens on the varied mixture after compute-optimal pretraining (Appendix "Details
# of Training"), the runs' default tokens.
COOLDOWN_TOKENS = 20e9

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


FAMILIES = ("capacity", "capacity_data", "dml", "sodm")


class World(eqx.Module):
    """A simulated world: intrinsic domains, validation sets and benchmarks with known parameters.

    **Fields**: `t` [k, n] dataset profiles (columns on the simplex), `a`, `A`, `C` [k] domain power laws,
    `w` [V, k] validation-set weights over domains, `C_val` [V], `bench_k` [B, V], `bench_A`, `bench_B`,
    `bench_C` [B] logistic maps; `capacity` maps the model size M to capacity (static); names of the datasets,
    validation sets and benchmarks (static). The zoo's further fields (see `make_world`): `data_A`, `data_b` [k]
    a per-domain data term, `gain` [k] exponential mixture effects, `noise_log_scale` [n] heteroscedastic noise,
    and the `family`. Losses take the tokens D trained on the mixture (default `COOLDOWN_TOKENS`, the paper's
    20B-token cooldown in which the mixture varies); only the "capacity_data" family's losses depend on them.

    Domain i's reducible loss at mixture r (eta_i = <t_i, r>) and size M, by family:
    - "capacity": A_i / m_i^a_i with m the exact capacity allocation (the CAMEL paper's model);
    - "capacity_data": that plus data_A_i / (eta_i D / 20e9)^data_b_i: the domain's tokens seen;
    - "dml": A_i (capacity / k)^-a_i + data_A_i exp(-gain_i eta_i) (an exponential mixture term);
    - "sodm": A_i (capacity / k)^-a_i + data_A_i eta_i^-data_b_i (a mixture term that does not shrink with M).
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
    data_A: Float[Array, " k"] | None = None
    data_b: Float[Array, " k"] | None = None
    gain: Float[Array, " k"] | None = None
    noise_log_scale: Float[Array, " n"] | None = None
    family: str = eqx.field(static=True, default="capacity")

    @property
    def n_datasets(self) -> int:
        return int(self.t.shape[1])

    def allocation(self, r: Float[Array, " n"], size: Float[Array, ""]) -> Float[Array, " k"]:
        """Exact optimal capacity allocation m* for one mixture and size (the KKT solution)."""
        eta = self.t @ r
        log_x = jnp.log(self.a * self.A * eta)
        log_lam = _solve_log_lambda(log_x, self.a, jnp.log(self.capacity(size)))
        return jnp.exp((log_x - log_lam) / (self.a + 1))

    def _reducible(self, r: Array, size: Array, tokens: Array | None) -> Array:
        """Each domain's reducible loss [P, k] (the family's model, see the class docstring)."""
        if self.family in ("capacity", "capacity_data"):
            m = jax.vmap(self.allocation)(r, size)  # [P, k]
            out = self.A[None, :] * jnp.exp(-self.a[None, :] * jnp.log(m))
        else:
            share = jnp.log(self.capacity(size) / self.t.shape[0])[:, None]
            out = self.A[None, :] * jnp.exp(-self.a[None, :] * share)
        if self.family == "capacity":
            return out
        eta = r @ self.t.T
        data_A = _needed(self.data_A, "data_A", self.family)[None, :]
        if self.family == "dml":
            return out + data_A * jnp.exp(-_needed(self.gain, "gain", self.family)[None, :] * eta)
        if self.family == "capacity_data" and tokens is not None:
            eta = eta * tokens[:, None] / COOLDOWN_TOKENS  # the domain's tokens seen, in cooldown units
        return out + data_A * eta ** -_needed(self.data_b, "data_b", self.family)[None, :]

    def train_loss(self, r: Float[Array, "P n"], size: Float[Array, " P"], tokens: Array | None = None) -> Array:
        eta = r @ self.t.T
        return jnp.sum(eta * (self.C[None, :] + self._reducible(r, size, tokens)), axis=1)

    def losses(self, r: Float[Array, "P n"], size: Float[Array, " P"], tokens: Array | None = None) -> Array:
        """Validation losses of every validation set, [P, V] (`tokens` [P], default `COOLDOWN_TOKENS`)."""
        return self.C_val[None, :] + self._reducible(r, size, tokens) @ self.w.T

    def accuracies(self, r: Float[Array, "P n"], size: Float[Array, " P"], tokens: Array | None = None) -> Array:
        L = self.losses(r, size, tokens)
        return self.bench_C[None, :] + self.bench_A[None, :] * jax.nn.sigmoid(
            -(L @ self.bench_k.T + self.bench_B[None, :])
        )

    def noise_scale(self, r: Float[Array, "P n"]) -> Float[Array, " P"]:
        """Each run's noise standard deviation relative to `noise` (1 everywhere without heteroscedasticity)."""
        if self.noise_log_scale is None:
            return jnp.ones(r.shape[0], r.dtype)
        return jnp.exp(r @ self.noise_log_scale)

    def score(self, r: Float[Array, " n"], size: float | Array, weights: Mapping[str, float]) -> Array:
        """The true score of one mixture: the weighted benchmark accuracy sum_b w_b Acc_b(r, M) (`weights` are
        benchmark weights, e.g. `BENCHMARK_WEIGHTS["balanced"]`)."""
        return self.true_score(size, weights)(r)

    def true_score(self, size: float | Array, weights: Mapping[str, float]) -> TrueScore:
        """The true score at one size as a callable module: `optimal_mixture(world.true_score(20.0, w), 5,
        key=key)` gives the true optimal mixture, and a new size reuses the compiled program."""
        w = jnp.asarray([float(weights.get(b, 0.0)) for b in self.benchmarks])
        return TrueScore(self, jnp.asarray(size, dtype=w.dtype), w)

    def objective(self, r: Float[Array, " n"], size: float | Array, weights: Mapping[str, float]) -> Array:
        """Deprecated name of `score`."""
        warn_renamed("World.objective", "World.score")
        return self.score(r, size, weights)

    def true_objective(self, size: float | Array, weights: Mapping[str, float]) -> TrueScore:
        """Deprecated name of `true_score`."""
        warn_renamed("World.true_objective", "World.true_score")
        return self.true_score(size, weights)

    def runs(
        self,
        mixtures: ArrayLike,
        sizes: Sequence[float],
        *,
        tokens: float = COOLDOWN_TOKENS,
        noise: float = 0.0,
        key: Array | None = None,
        params_fn: Callable[[Array], Array] = paper_active_params,
    ) -> pd.DataFrame:
        """The runs table: every mixture at every size, with losses, accuracies, parameters, tokens and FLOPs.

        `noise` is a relative Gaussian noise on losses (and an absolute one of the same size on accuracies),
        drawn from `key`, times `noise_scale(r)` (heteroscedastic worlds). FLOPs are 6 N D with N the active
        parameters (`params_fn`) and D `tokens` (trained on the mixture; a "capacity_data" world's losses use it).
        """
        mixture_rows = np.asarray(mixtures, dtype=float)
        sizes_arr = np.asarray(sizes, dtype=float)
        r = np.tile(mixture_rows, (len(sizes_arr), 1))
        M = np.repeat(sizes_arr, len(mixture_rows))
        D = np.full(len(M), float(tokens))
        L, acc = (np.asarray(x) for x in _losses_and_accuracies(self, jnp.asarray(r), jnp.asarray(M), jnp.asarray(D)))
        if noise > 0:
            if key is None:
                raise ValueError("`noise` > 0 needs a `key`")
            k1, k2 = jax.random.split(key)
            scale = noise * np.asarray(self.noise_scale(jnp.asarray(r)))[:, None]
            L = L * (1 + scale * np.asarray(jax.random.normal(k1, L.shape)))
            acc = acc + scale * np.asarray(jax.random.normal(k2, acc.shape))
        N = np.asarray(params_fn(jnp.asarray(M)))
        table = {f"r_{d}": r[:, j] for j, d in enumerate(self.datasets)}
        table |= {"mixture": np.tile(np.arange(len(mixture_rows)), len(sizes_arr)), "size": M, "params": N}
        table |= {"tokens": D, "flops": 6.0 * N * D}
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


def _needed(field: Array | None, name: str, family: str) -> Array:
    if field is None:
        raise ValueError(f"a {family!r} world needs `{name}`")
    return field


@eqx.filter_jit
def _losses_and_accuracies(world: World, r: Array, size: Array, tokens: Array) -> tuple[Array, Array]:
    return world.losses(r, size, tokens), world.accuracies(r, size, tokens)


class TrueScore(eqx.Module):
    """r -> sum_b w_b Acc_b(r, M) of a `World` at one size (arrays traced, so sizes share one compilation)."""

    world: World
    size: Array
    weights: Array

    def __call__(self, r: Float[Array, " n"]) -> Array:
        acc = self.world.accuracies(r[None, :], jnp.reshape(self.size, (1,)).astype(r.dtype))[0]
        return jnp.dot(self.weights, acc)


@dataclasses.dataclass(frozen=True)
class PowerCapacity:
    """Capacity M^exponent (in units of the capacity at M = 1); compared by value, so worlds of one family share
    their compiled programs."""

    exponent: float

    def __call__(self, size: Array) -> Array:
        return size**self.exponent


# The paper's reference mixture of its five datasets (the centre of the +-20% design).
REFERENCE = (0.35, 0.25, 0.15, 0.10, 0.15)

# How much each benchmark draws on each validation set (rows: BENCHMARKS; columns: the zoo's validation sets, one
# per intrinsic domain named like DATASETS). Math benchmarks read math-like losses, code benchmarks code, C-Eval
# Chinese, and so on; each world perturbs these shares.
SPECIALIZATION = np.array(
    [
        [0.30, 0.05, 0.05, 0.10, 0.50],  # mmlu
        [0.50, 0.00, 0.05, 0.05, 0.40],  # arc_c
        [0.35, 0.00, 0.25, 0.30, 0.10],  # bbh
        [0.20, 0.00, 0.05, 0.75, 0.00],  # gsm8k
        [0.05, 0.00, 0.10, 0.85, 0.00],  # math
        [0.10, 0.00, 0.85, 0.05, 0.00],  # humaneval
        [0.05, 0.70, 0.00, 0.05, 0.20],  # ceval
    ]
)
SPECIALIZATION.flags.writeable = False  # an exported constant: read-only, as every other one


def default_world(key: Array, *, n_domains: int = 3, n_validation: int = 4, capacity_exponent: float = 3.0) -> World:
    """A random world of the "capacity" family with the paper's five datasets and seven benchmarks.

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
    bench_A = (1.0 - _CHANCE) * jax.random.uniform(keys[7], (B,), minval=0.6, maxval=0.95)
    probe = World(
        t, a, A, C, w, C_val, bench_k, bench_A, jnp.zeros(B), _CHANCE, PowerCapacity(capacity_exponent),
        DATASETS, tuple(f"val{v}" for v in range(V)), BENCHMARKS,
    )  # fmt: skip
    return _centred(probe, keys[8], 0.3)


_CHANCE = jnp.array([0.25, 0.25, 0.2, 0.0, 0.0, 0.0, 0.25])  # chance levels (multiple choice vs generative)


def _centred(world: World, key: Array, spread: float) -> World:
    """Centre each benchmark's sigmoid at its proxy loss of a mid-size model (M=14) on a uniform mixture, plus a
    random offset of standard deviation `spread`."""
    n = world.n_datasets
    L_mid = world.losses(jnp.full((1, n), 1.0 / n), jnp.array([14.0]))[0]
    bench_B = -(world.bench_k @ L_mid) + spread * jax.random.normal(key, world.bench_B.shape)
    return eqx.tree_at(lambda w: w.bench_B, world, bench_B)


def make_world(key: Array, family: str = "capacity_data", *, heteroscedastic: float = 1.0, **kwargs: Any) -> World:
    """A random world of the zoo (see `World` for each family's domain losses).

    - "capacity": `default_world(key, **kwargs)`, the CAMEL paper's capacity-allocation model (for reference);
    - "capacity_data" (the default): one intrinsic domain per dataset name, capacity allocation plus a per-domain
      data term (each domain's loss also falls with the tokens it receives, eta_i D), specialized
      validation sets and benchmarks (`SPECIALIZATION`); mixture effects of the size real data show;
    - "dml": exponential mixture effects (Ye et al.'s form); "sodm": an additive mixture term (Shukor et al.'s).

    `heteroscedastic` >= 1 is the ratio of the noise standard deviation between the noisiest and the quietest
    pure-dataset mixture (repeat variance differing by mixture; 1: the same noise everywhere).
    """
    if family not in FAMILIES:
        raise ValueError(f"unknown world family {family!r}; choose one of {FAMILIES}")
    if not (np.isfinite(heteroscedastic) and heteroscedastic >= 1):
        raise ValueError(f"`heteroscedastic` must be a finite ratio >= 1; got {heteroscedastic!r}")
    if family == "capacity":
        world = default_world(key, **kwargs)
    else:
        world = _specialized_world(key, family, **kwargs)
    if heteroscedastic == 1:
        return world
    u = jax.random.uniform(jax.random.fold_in(key, 7), (world.n_datasets,))
    u = (u - u.min()) / (u.max() - u.min())
    return eqx.tree_at(lambda w: w.noise_log_scale, world, np.log(heteroscedastic) * (u - u.mean()),
                       is_leaf=lambda x: x is None)  # fmt: skip


def _specialized_world(
    key: Array, family: str, *, capacity_exponent: float = 3.0, leak: float = 2.0, sensitivity: float = 4.5
) -> World:
    """The zoo's worlds with one intrinsic domain per dataset name: specialized datasets, validation sets and
    benchmarks; `sensitivity` scales how steeply accuracies respond to losses."""
    keys = jax.random.split(key, 11)
    k, B = len(DATASETS), len(BENCHMARKS)
    eye = jnp.eye(k)
    t = jax.random.dirichlet(keys[0], leak + 6.0 * eye).T  # column j: dataset j, mostly its own domain
    a = 0.35 + 0.08 * jax.random.uniform(keys[1], (k,), minval=-1.0, maxval=1.0)
    A = jnp.exp(jax.random.uniform(keys[2], (k,), minval=np.log(0.25), maxval=np.log(0.8)))
    C = jax.random.uniform(keys[3], (k,), minval=1.0, maxval=2.0)
    w = jax.random.dirichlet(keys[4], 0.2 + 8.0 * eye)  # validation set v: mostly domain v
    C_val = jax.random.uniform(keys[5], (k,), minval=1.5, maxval=2.5)
    bench_k = sensitivity * jax.random.dirichlet(keys[6], 0.1 + 20.0 * jnp.asarray(SPECIALIZATION))
    bench_A = (1.0 - _CHANCE) * jax.random.uniform(keys[7], (B,), minval=0.6, maxval=0.95)
    data_A = jax.random.uniform(keys[9], (k,), minval=0.5, maxval=1.0)
    data_b = jax.random.uniform(keys[10], (k,), minval=0.12, maxval=0.22)
    gain = jax.random.uniform(jax.random.fold_in(key, 11), (k,), minval=1.0, maxval=3.0)
    probe = World(
        t, a, A, C, w, C_val, bench_k, bench_A, jnp.zeros(B), _CHANCE, PowerCapacity(capacity_exponent),
        DATASETS, tuple(f"val_{d}" for d in DATASETS), BENCHMARKS, data_A=data_A, data_b=data_b,
        gain=gain if family == "dml" else None,
        family=family,
    )  # fmt: skip
    return _centred(probe, keys[8], 0.3)


def realism(world: World, *, key: Array, n_mixtures: int = 3000, sizes: Sequence[float] = (4.0, 10.0, 20.0)) -> dict:
    """How much a world cares about the mixture, in the terms real data are quoted in.

    Over Dirichlet(1) mixtures with every weight >= 0.02 (drawn from `key`): `loss_spread` {M: [V]} each
    validation loss's max/min - 1 in percent; `score_spread` {name: points} the spread (max - min, in
    accuracy points) of the score of each benchmark weighting of `BENCHMARK_WEIGHTS` at the largest size; `gain`
    {name: points} the true optimum over the simplex minus the paper's `REFERENCE` mixture at that size (for
    5-dataset worlds); `optima` {name: r*} and `optimum_by_size` {M: r*} the true optimal mixtures (the Balanced
    score).
    """
    from ..mixture._optimize import optimal_mixture
    from ..mixture._pipeline import BENCHMARK_WEIGHTS

    n = world.n_datasets
    draws = jax.random.dirichlet(key, jnp.ones(n), (20 * n_mixtures,))
    r = draws[jnp.min(draws, axis=1) >= 0.02][:n_mixtures]
    loss_spread = {}
    for M in sizes:
        L = np.asarray(world.losses(r, jnp.full(r.shape[0], float(M))))
        loss_spread[float(M)] = 100.0 * (L.max(axis=0) / L.min(axis=0) - 1.0)
    top = float(max(sizes))
    out: dict[str, Any] = {"loss_spread": loss_spread, "score_spread": {}, "gain": {}, "optima": {}}
    for name, weights in BENCHMARK_WEIGHTS.items():
        f = world.true_score(top, weights)
        values = np.asarray(jax.vmap(f)(r))
        best = optimal_mixture(f, n, key=key)
        out["score_spread"][name] = 100.0 * float(values.max() - values.min())
        out["optima"][name] = np.asarray(best.r)
        if n == len(REFERENCE):
            out["gain"][name] = 100.0 * float(best.value - f(jnp.asarray(REFERENCE, dtype=r.dtype)))
    balanced = BENCHMARK_WEIGHTS["balanced"]
    out["optimum_by_size"] = {
        float(M): np.asarray(optimal_mixture(world.true_score(float(M), balanced), n, key=key).r) for M in sizes
    }
    return out
