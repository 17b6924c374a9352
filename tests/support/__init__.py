"""Helpers the tests share: each a module of its own, imported by the tests that need it, never a
test module imported by another."""
