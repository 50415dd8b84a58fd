"""The lanes of a solve (starts x targets x resamples) spread over devices: one program per device, no collectives.

Every lane of a fit is independent of every other until the best start is chosen, so the lane axis is laid out on a
one-axis `Mesh` and each device solves its own lanes with `jax.shard_map`. Each device's loops then stop on its own
lanes' conditions. Left to the automatic partitioner, the same vmapped `while_loop`s became a cross-device
all-reduce of "is any lane still running" at every iteration of every loop (four in a bootstrap chunk); on forced
CPU host devices a bootstrap of tied CAMEL with the Newton polish hung in its first chunk, every thread waiting
(issue 57). Here nothing crosses devices inside a loop: the lanes are padded to a multiple of the device count
(with copies of the first lane, whose results are dropped), solved, and concatenated back in order.

A device computes its lanes as one device would: the same iterates; the last bits can differ with how many lanes
a program holds (so a converged lane can stop elsewhere within its tolerance), never the objective beyond ~1e-14.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

LANE_AXIS = "lanes"


def lane_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh | None:
    """The one-axis mesh the lanes are laid out on: `devices` (default every local device of this process), or None
    for a single device (no sharding).

    **Arguments**:

    - `devices`: the devices to use; `jax.devices()` in a `jax.distributed` run spans every process.

    **Returns**: a `jax.sharding.Mesh` with the axis "lanes", or None.
    """
    chosen = list(jax.local_devices() if devices is None else devices)
    if not chosen:
        raise ValueError("`devices` is empty; pass None for every local device")
    if len(chosen) == 1:
        return None
    return Mesh(np.array(chosen), (LANE_AXIS,))


def padded(n: int, mesh: Mesh | None) -> int:
    """`n` rounded up to a multiple of the mesh's device count."""
    size = 1 if mesh is None else mesh.size
    return -(-n // size) * size


def across_devices(solve: Callable[..., Any], mesh: Mesh | None, *lanes: Any) -> Any:
    """`solve(*lanes)` with every leaf of `lanes` (leading axis N, the lanes) split over the mesh's devices, each
    device calling `solve` on its own N / devices lanes. `solve` must treat lanes independently (a vmap); its
    outputs have the leading lane axis too. On one device (mesh None), `solve(*lanes)` itself."""
    if mesh is None:
        return solve(*lanes)
    n = jax.tree.leaves(lanes)[0].shape[0]
    total = padded(n, mesh)

    def pad(leaf: Any) -> Any:
        extra = jnp.broadcast_to(leaf[:1], (total - n,) + leaf.shape[1:])
        return jnp.concatenate([leaf, extra]) if total > n else leaf

    spec = PartitionSpec(LANE_AXIS)
    sharded = jax.shard_map(solve, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False)
    out = sharded(*jax.tree.map(pad, lanes))
    return jax.tree.map(lambda leaf: leaf[:n], out)
