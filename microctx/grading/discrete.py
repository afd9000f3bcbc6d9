"""scipy.stats' `hypergeom.sf` and `binom.isf` on scipy's own ufuncs, without scipy.stats' import.

`import scipy.stats` costs about 0.6 s of CPU here (it loads most of scipy); the weak test needs
two of its functions, whose numbers come from two compiled ufuncs of `scipy.special._ufuncs`
(Boost's hypergeometric survival function and binomial inverse survival function). These
wrappers take the same arguments and give the same numbers, bit for bit, with scipy.stats'
handling of the support's ends and of invalid arguments (`rv_discrete.sf` and `rv_discrete.isf`:
NaN for invalid shapes, 1 below the support, the support's ends at q = 1 and q = 0);
tests/test_stats.py compares them with scipy.stats over a grid that holds every such case.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from microctx.grading import special


def _integral(x: np.ndarray) -> np.ndarray:
    returned: np.ndarray = x == np.round(x)
    return returned


def hypergeom_sf(k: npt.ArrayLike, total: npt.ArrayLike, good: npt.ArrayLike, drawn: npt.ArrayLike) -> np.ndarray:
    """`scipy.stats.hypergeom.sf(k, M=total, n=good, N=drawn)`: P(X > k) for X the good objects
    among `drawn` taken without replacement from `total` of which `good` are good."""
    k, m, n, big_n = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (k, total, good, drawn)))
    with np.errstate(invalid="ignore"):
        low, high = np.maximum(big_n - (m - n), 0), np.minimum(n, big_n)
        valid = (m > 0) & (n >= 0) & (big_n >= 0) & (n <= m) & (big_n <= m) & _integral(m) & _integral(n) & _integral(big_n)
        inside = valid & (k >= low) & (k < high) & np.isfinite(k)
        out = np.zeros(k.shape)
        out[~valid | np.isnan(k)] = np.nan
        out[((k < low) | np.isneginf(k)) & valid] = 1.0
    if inside.any():
        values = special._hypergeom_sf(k[inside], n[inside], big_n[inside], m[inside])
        out[inside] = np.clip(values, 0, 1)
    return out


def binom_isf(q: npt.ArrayLike, n: npt.ArrayLike, p: npt.ArrayLike) -> np.ndarray:
    """`scipy.stats.binom.isf(q, n, p)`: the smallest k with P(X > k) <= q for X ~ Binomial(n, p)
    (-1 at q = 1, n at q = 0)."""
    q, n, p = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (q, n, p)))
    with np.errstate(invalid="ignore"):
        valid = (n >= 0) & _integral(n) & (p >= 0) & (p <= 1)
        inside = valid & (q > 0) & (q < 1)
        out = np.full(q.shape, np.nan)
        out[(q == 1) & valid] = -1.0
        at_zero = (q == 0) & valid
        out[at_zero] = n[at_zero]
    if inside.any():
        out[inside] = special._binom_isf(q[inside], n[inside], p[inside])
    return out
