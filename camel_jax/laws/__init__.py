"""Scaling laws: each an `eqx.Module` whose array leaves are its free parameters."""

from ._base import AbstractLaw as AbstractLaw
from ._base import n_free_parameters as n_free_parameters
from ._camel import CAMEL as CAMEL
from ._camel_data import CAMELData as CAMELData
from ._chinchilla import Chinchilla as Chinchilla
from ._dml import DML as DML
from ._loss_to_benchmark import LossToBenchmark as LossToBenchmark
from ._power_law import PowerLaw as PowerLaw
from ._sodm_additive import SODMAdditive as SODMAdditive
from ._sodm_joint import SODMJoint as SODMJoint
