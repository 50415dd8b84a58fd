import jax

# float64 for the whole session; float32 behaviour is tested with explicit dtypes. Strict promotion and raising
# rank promotion catch silent dtype changes and broadcasting.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
