"""`camel_jax.simulate`: a ground-truth world from the capacity-allocation model (exact KKT solve)."""

from ._simulate import BENCHMARKS as BENCHMARKS
from ._simulate import DATASETS as DATASETS
from ._simulate import PAPER_PARAMS_PER_M3 as PAPER_PARAMS_PER_M3
from ._simulate import World as World
from ._simulate import default_world as default_world
from ._simulate import paper_active_params as paper_active_params
