"""What the command line's parser needs from the laws, without importing them (and JAX): `--help` and argument
errors answer at once. tests/test_doors.py checks these against `laws._registry` and `laws._camel`."""

# `laws._registry.LAW_NAMES`: the registered names, then the aliases
LAW_NAMES = (
    "camel-tied",
    "camel-free",
    "camel-data-tied",
    "camel-data-free",
    "sodm-additive",
    "sodm-joint",
    "camel-mixture",
    "dml",
    "chinchilla",
    "power",
    "log-linear",
    "log-linear-size",
    "camel",
    "camel-data",
    "sodm",
)
# `mixture._export.EXPORT_FORMATS`: the formats `optimize --export` writes and their files' suffixes
EXPORT_FORMATS = {
    "json": ".mixture.json",
    "olmo-core": ".olmo-core.yaml",
    "levanter": ".levanter.yaml",
    "megatron": ".megatron.txt",
    "nanotron": ".nanotron.yaml",
}
# `laws._base.UNCONVERGED_HINT`'s advice (and CAMELData's), in the library's words and as a command-line user acts on it
COMMAND_LINE_ADVICE = {
    "raise FitOptions(max_steps=..., polish=...)": "refit with more steps (camel-jax fit --max-steps, --polish)",
    "raise FitOptions(polish=...)": "refit with more Newton steps (camel-jax fit --polish)",
    "raise AscentOptions(max_polish_steps=...) or restarts": "decide from Python with more ascent steps "
    "(cj.mixture.decide_loss(..., ascent=AscentOptions(max_polish_steps=...)))",
}


def for_command_line(text: str) -> str:
    """A library message as the command line prints it: the solver's options named by their flags."""
    for library, flags in COMMAND_LINE_ADVICE.items():
        text = text.replace(library, flags)
    return text


# `data._formats.FORMATS`: the published formats the reader knows by name
READER_FORMATS = ("dmsl", "mixinglaws", "olmix", "regmix")
# `laws._camel.CAPACITY_EXPONENT`: tied CAMEL's capacity ~ M^c, the paper's scale index
CAPACITY_EXPONENT = 3.0


class DeferredModule:
    """A module imported at its first attribute access: the subcommands' `np`, so that building the parser (for
    `--help` and argument errors) imports no numpy (a third of a second on a loaded machine)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str):
        import importlib

        return getattr(importlib.import_module(self._name), attribute)
