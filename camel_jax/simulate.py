"""`camel_jax.simulate`: ground-truth worlds (the capacity-allocation model, exact KKT solve, and the zoo)."""

from .experiments._simulate import BENCHMARKS as BENCHMARKS
from .experiments._simulate import COOLDOWN_TOKENS as COOLDOWN_TOKENS
from .experiments._simulate import DATASETS as DATASETS
from .experiments._simulate import FAMILIES as FAMILIES
from .experiments._simulate import PAPER_PARAMS_PER_M3 as PAPER_PARAMS_PER_M3
from .experiments._simulate import REFERENCE as REFERENCE
from .experiments._simulate import SPECIALIZATION as SPECIALIZATION
from .experiments._simulate import PowerCapacity as PowerCapacity
from .experiments._simulate import World as World
from .experiments._simulate import default_world as default_world
from .experiments._simulate import make_world as make_world
from .experiments._simulate import paper_active_params as paper_active_params
from .experiments._simulate import realism as realism
