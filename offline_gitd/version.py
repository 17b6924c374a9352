"""The package version, on the ground floor so every module can record it without importing more."""

__version__ = "0.2.0"
