"""The package's benchmarks, run by hand as modules from the repository's root:
``python -m benchmarks.NAME`` (docs/benchmarks.md). Speed is never asserted by a test."""
