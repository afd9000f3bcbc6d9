"""The package version: setuptools-scm derives it from git when the package is built or installed.

One place: a commit moves it, so outputs keyed on it (sweep results, run manifests) never mix two
versions. The build writes `_scm_version.py` (not tracked); a source tree that was never built
asks the installed metadata, else says it does not know.
"""

try:
    from microctx._scm_version import version as __version__
except ImportError:  # pragma: no cover - a source tree on PYTHONPATH that was never built
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("microctx")
    except PackageNotFoundError:
        __version__ = "0+unknown"
