"""The one exception type of configuration mistakes (its own module so that every config layer can raise it
without importing the others)."""


class ConfigError(ValueError):
    """A wrong key or value in the configuration, raised before anything heavy happens (no model, no run
    directory). The message is one line that names the key."""
