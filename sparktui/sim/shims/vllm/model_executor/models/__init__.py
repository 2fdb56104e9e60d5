"""Simulated (see sparktui/sim/support.py)."""
