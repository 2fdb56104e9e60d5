"""The one exception the demo raises for the user: str() is a plain sentence saying what to do."""


class DemoError(Exception):
    """The simulated cluster cannot start or run here."""
