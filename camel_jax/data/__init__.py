"""The data layer: `read_runs`, the one reader of a user's table of training runs (wide or long, with checkpoints
and several validation losses, in the formats the field publishes), the containers it fills (`MixtureData`,
`BenchmarkData`, in `_containers`) and the checks of tables, mixtures, targets and designs (`_checks`). The package
also ships `gadre2024_subset.csv` (see ATTRIBUTION.md).

The reader's names are imported on first use (`camel_jax._lazy`), so that the core, which imports the checks,
does not import pandas."""

import typing as _typing

if _typing.TYPE_CHECKING:
    from ._formats import FORMATS as FORMATS
    from ._read import ReadNote as ReadNote
    from ._read import read_runs as read_runs

__all__ = ["FORMATS", "ReadNote", "read_runs"]

# Hidden from mypy, which would otherwise accept any name of the package.
if not _typing.TYPE_CHECKING:
    from .._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, __file__, globals(), {})
