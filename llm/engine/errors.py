"""The engine's errors a user can act on (their messages say what to change). Torch-free, so a command
line can recognise them without loading the engine."""


class CheckpointError(Exception):
    """A model directory that cannot be loaded: missing files, an unknown layout, bad fields."""


class DecodingError(ValueError):
    """Decoding settings that do not fit together or do not fit the model."""
