"""Simulated Ray (see sparktui/sim): the `ray` CLI's start, status and stop."""

__version__ = "2.49.2"
