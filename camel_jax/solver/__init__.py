"""The solver layer: options and result codes (`FitOptions`, `Status`), the checks every entry point runs, the
lockstep L-BFGS with its hand-off, the damped-Newton finish, residuals, and the implicit adjoint of an optimum.
It imports only `camel_jax.laws`."""
