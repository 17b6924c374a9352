"""Shared test set-up: JAX on the CPU in float32, deterministic and quiet."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
