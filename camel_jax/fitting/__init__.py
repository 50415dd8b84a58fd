"""The fitting layer: the data containers (`MixtureData`, `BenchmarkData`), the objective, `fit` / `fit_arrays`,
resampling and the bootstrap, identifiability, extrapolation calibration and each run's influence. It imports
the laws and the solver, never the mixture or experiment layers."""
