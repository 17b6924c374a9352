"""Sweeps (docs/sweeps.md): a TOML grid of runs, expanded, scheduled on Ray, collected on one board."""
