"""The package version (one place; imported by modules that record it in their outputs)."""

__version__ = "0.1.0"
