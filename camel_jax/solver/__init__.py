"""The solver layer: options and result codes (`FitOptions`, `Status`), the lockstep L-BFGS with its hand-off, the
damped-Newton finish, residuals, and the implicit adjoint of an optimum. It imports no law, data or fitting module
(tests/test_layers.py)."""
