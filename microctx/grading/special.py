"""scipy's special functions the statistics use, without `import scipy.special`'s start-up.

`from microctx.grading.special import betaincinv, stdtr, stdtrit` gives scipy's own ufuncs (the
same objects as `scipy.special.betaincinv` and so on: the same numbers, bit for bit). Importing
`scipy.special` itself costs about 0.25 s of CPU here, nearly all of it its array-API layer
(array_api_compat walks numpy's namespace, which imports numpy.testing and numpy.f2py); the
functions live in the compiled `scipy.special._ufuncs`, which loads in about 25 ms. So the
first use loads that module alone, under a bare stand-in for the package that is removed again
at once; a later `import scipy.special` runs the package's own initialisation as usual and
finds the same compiled module.

The stand-in is only ever used while no other thread runs (the command line). With other threads
alive (a report's kernel, Dask's workers) the package is imported as usual: a thread importing a
submodule of `scipy.special` (`scipy.special._basic`) while the stand-in sat in `sys.modules`
would find it as the parent, not wait on its lock, and fail on a half-made module (a reviewer's
finding; the import system's per-module lock guards `scipy.special` itself, not what is below
it). When scipy.special is already imported, or the compiled module cannot be loaded this way,
the package is imported as usual.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import threading
import types
from typing import Any

NAMES = ("betaincinv", "ndtri", "stdtr", "stdtrit", "_hypergeom_sf", "_binom_isf")  # the last two: `discrete`
PACKAGE, COMPILED = "scipy.special", "scipy.special._ufuncs"


def _alone() -> Any:
    """`scipy.special._ufuncs` loaded under a bare stand-in package, removed again at once; None
    when that cannot be done (the package is then imported as usual). Only while no other thread
    runs: none can see the stand-in, and none can start one meanwhile."""
    import scipy

    spec = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
    spec.submodule_search_locations = [os.path.join(os.path.dirname(scipy.__file__), "special")]
    stand_in = types.ModuleType(PACKAGE)
    stand_in.__spec__, stand_in.__path__ = spec, spec.submodule_search_locations
    sys.modules[PACKAGE] = stand_in
    try:
        return importlib.import_module(COMPILED)
    except ImportError:
        sys.modules.pop(COMPILED, None)
        return None
    finally:
        if sys.modules.get(PACKAGE) is stand_in:
            del sys.modules[PACKAGE]


def _ufuncs() -> Any:
    """The compiled module holding scipy's special ufuncs, `scipy.special._ufuncs` (which also has
    the private ones `discrete` uses): loaded alone, unless it is loaded already or other threads
    run; then through the package (the import system waits for an import another thread makes)."""
    if threading.active_count() == 1:
        found = sys.modules.get(COMPILED) or _alone()
        if found is not None:
            return found
    importlib.import_module(PACKAGE)
    return importlib.import_module(COMPILED)


def __getattr__(name: str) -> Any:
    """One of NAMES: scipy's ufunc, its module loaded on first use (PEP 562)."""
    if name not in NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_ufuncs(), name)
