"""Recipes as the start of a plan: sparkrun's and NVIDIA's, read as their own tools read them.

- `recipe` — `Recipe`, loading a recipe file (sparkrun's or NVIDIA's, told apart by their keys) into plan options
- `rules` — how sparkrun reads a recipe: its runtime, and a command-less recipe's defaults as engine flags
- `mods` — a sparkrun recipe's `mods`: which sparktui can carry, and why the others are refused
- `nvidia` — NVIDIA's Local AI Inference Recipes (schema 3 and 4)
"""
