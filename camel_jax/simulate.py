"""`camel_jax.simulate`: ground-truth worlds (the capacity-allocation model, exact KKT solve, and the zoo)."""

from ._simulate import BENCHMARKS as BENCHMARKS
from ._simulate import COOLDOWN_TOKENS as COOLDOWN_TOKENS
from ._simulate import DATASETS as DATASETS
from ._simulate import FAMILIES as FAMILIES
from ._simulate import PAPER_PARAMS_PER_M3 as PAPER_PARAMS_PER_M3
from ._simulate import REFERENCE as REFERENCE
from ._simulate import SPECIALIZATION as SPECIALIZATION
from ._simulate import PowerCapacity as PowerCapacity
from ._simulate import World as World
from ._simulate import default_world as default_world
from ._simulate import make_world as make_world
from ._simulate import paper_active_params as paper_active_params
from ._simulate import realism as realism
