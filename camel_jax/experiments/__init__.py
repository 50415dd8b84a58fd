"""The experiments layer: compute-aware designs (`sample_design`, `allocate`), the paper's extrapolation protocol,
law selection, simulated worlds, and backtests of every decision on simulated and real tables. It imports the
mixture layer and below; nothing below imports it."""
