"""Scaling laws: each an `eqx.Module` whose array leaves are its free parameters."""

from ._base import AbstractLaw as AbstractLaw
from ._base import n_free_parameters as n_free_parameters
from ._camel import CAMEL as CAMEL
from ._camel_data import CAMELData as CAMELData
from ._camel_mixture import CAMELMixture as CAMELMixture
from ._chinchilla import Chinchilla as Chinchilla
from ._dml import DML as DML
from ._log_linear import LogLinear as LogLinear
from ._loss_to_benchmark import LossToBenchmark as LossToBenchmark
from ._power_law import PowerLaw as PowerLaw
from ._registry import ALIASES as ALIASES
from ._registry import LAW_NAMES as LAW_NAMES
from ._registry import LAWS as LAWS
from ._registry import LawEntry as LawEntry
from ._registry import law_entry as law_entry
from ._registry import law_name as law_name
from ._registry import law_template as law_template
from ._sodm_additive import SODMAdditive as SODMAdditive
from ._sodm_joint import SODMJoint as SODMJoint
