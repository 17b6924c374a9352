"""Sweeps (DESIGN §8): a TOML grid of runs, expanded, scheduled on Ray, collected on one board."""
