"""scipy's special functions the statistics use, without `import scipy.special`'s start-up.

`from microctx.grading.special import betaincinv, stdtr, stdtrit` gives scipy's own ufuncs (the
same objects as `scipy.special.betaincinv` and so on: the same numbers, bit for bit). Importing
`scipy.special` itself costs about 0.25 s of CPU here, nearly all of it its array-API layer
(array_api_compat walks numpy's namespace, which imports numpy.testing and numpy.f2py); the
functions live in the compiled `scipy.special._ufuncs`, which loads in about 25 ms. So the
first use loads that module alone, under a bare stand-in for the package that is removed again
at once; a later `import scipy.special` runs the package's own initialisation as usual and
finds the same compiled module. When scipy.special is already imported, when the compiled module
cannot be loaded that way, or when another thread is running (the stand-in sits in `sys.modules`
for a moment, and a thread importing scipy then would get it: Dask's workers, a kernel's threads),
the package is imported as usual: the shortcut is for the single-threaded command line.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
from typing import Any

NAMES = ("betaincinv", "ndtri", "stdtr", "stdtrit", "_hypergeom_sf", "_binom_isf")  # the last two: `discrete`
_LOCK = threading.Lock()


def _ufuncs() -> Any:
    """The module holding scipy's special ufuncs, `scipy.special._ufuncs` (loaded alone unless scipy.special is)."""
    for name in ("scipy.special._ufuncs", "scipy.special"):
        if name in sys.modules:
            return sys.modules[name]
    if threading.active_count() > 1:  # not alone: no stand-in another thread could see
        return importlib.import_module("scipy.special")
    with _LOCK:
        if "scipy.special._ufuncs" in sys.modules:
            return sys.modules["scipy.special._ufuncs"]
        import scipy

        stand_in = types.ModuleType("scipy.special")
        stand_in.__path__ = [os.path.join(os.path.dirname(scipy.__file__), "special")]
        sys.modules["scipy.special"] = stand_in
        try:
            return importlib.import_module("scipy.special._ufuncs")
        except ImportError:
            pass
        finally:
            if sys.modules.get("scipy.special") is stand_in:
                del sys.modules["scipy.special"]
    return importlib.import_module("scipy.special")


def __getattr__(name: str) -> Any:
    """One of NAMES: scipy's ufunc, its module loaded on first use (PEP 562)."""
    if name not in NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(_ufuncs(), name)
