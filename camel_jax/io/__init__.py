"""At the edge: `save` and `load` of fits, bootstraps and pipelines in a versioned, untrusted-input-safe format."""
