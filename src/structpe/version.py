"""The package version, in a module of its own so the bottom floor can read it."""

__version__ = "0.1.0"
