"""The mixture layer: from losses to benchmarks (`fit_pipeline`, `Pipeline`), the optimal mixture on the simplex,
the verdict on the pick (`decide`), and the next runs to train. It imports the fitting layer and below."""
