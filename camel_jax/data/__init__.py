"""The data layer: `read_runs`, the one reader of a user's table of training runs (wide or long, with checkpoints
and several validation losses, in the formats the field publishes). The package also ships
`gadre2024_subset.csv` (see ATTRIBUTION.md)."""

from ._formats import FORMATS as FORMATS
from ._read import ReadNote as ReadNote
from ._read import read_runs as read_runs

__all__ = ["FORMATS", "ReadNote", "read_runs"]
