"""Widgets that render core data; none of them talks to a node."""
