"""sparktui: multi-node model serving over SSH, from a terminal."""

__version__ = "0.1.0"
