"""The errors a Pilot-Commit config value raises: a module of its own, so that every component can raise them without
importing the settings."""


class PCConfigError(ValueError):
    """A Pilot-Commit config value that cannot work; the message names the key and a fix."""


class PCConfigErrors(PCConfigError):
    """Several config values that cannot work, found in one reading of the settings: each line names a key and a fix,
    and a check that could not run because of them says so."""

    def __init__(self, problems: list[str]):
        self.problems = list(dict.fromkeys(problems))  # a key two settings read (a fallback) is named once
        super().__init__("\n".join(self.problems))


def problems_of(err: PCConfigError) -> list[str]:
    """The problem lines of one error or of several."""
    return err.problems if isinstance(err, PCConfigErrors) else [str(err)]
