"""The SDK's version: one place, read by pyproject.toml (setuptools dynamic version) and written into bundles."""

__version__ = "0.6.0"
