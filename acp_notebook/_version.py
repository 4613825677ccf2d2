"""The package's version, alone: the client sends it in `initialize` without importing the root."""

__version__ = "0.1.0"
