"""The error a Pilot-Commit config value raises: a module of its own, so that the allocators and stages, which the
settings look up, can raise it without importing the settings."""


class PCConfigError(ValueError):
    """A Pilot-Commit config value that cannot work; the message names the key and a fix."""
