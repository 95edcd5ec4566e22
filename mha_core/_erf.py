"""The complementary error function in float32 NumPy, for the exact (erf) form of GELU.

NumPy has no erf, SciPy is not a runtime dependency, and ``np.vectorize(math.erf)`` costs about
4 ms per (32, 1536) activation, 6 times per sentence. Instead: a Chebyshev fit of erfc with
fractional error below 1.2e-7 for every z >= 0 (Press et al., Numerical Recipes, 2nd ed., section
6.2). Evaluated in float32 the relative error stays below 2e-6 for z <= 4 (rounding of z*z inside
exp grows it to 1e-5 at z = 9, where erfc is 4e-37). Measured against ``math.erfc`` the GELU
built on it is within 4e-7 absolute on [-12, 12]; torch's own float32 GELU is within 1.1e-6.
"""

from __future__ import annotations

import numpy as np

# Coefficients of the fit, lowest power of t first: erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2).
_ERFC_COEFFICIENTS = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def erfc_nonnegative(z: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0, any shape, in the dtype of ``z`` (relative error of the fit below 1.2e-7)."""
    one = z.dtype.type(1)
    t = one / (one + z.dtype.type(0.5) * z)  # same shape as z
    poly = np.full_like(z, _ERFC_COEFFICIENTS[-1])  # same shape as z; Horner's rule, highest power first
    for coefficient in _ERFC_COEFFICIENTS[-2::-1]:
        poly *= t
        poly += z.dtype.type(coefficient)
    poly -= z * z
    np.exp(poly, out=poly)
    return t * poly  # same shape as z


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc(x) = 1 - erf(x) for any real x, elementwise; float32 in, float32 out.

    Uses erfc(-z) = 2 - erfc(z). Unlike ``1 - erf(x)`` it keeps full relative precision where
    erfc(x) is tiny (large positive x), which GELU needs at large negative inputs.
    """
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    tail = erfc_nonnegative(np.abs(x))  # same shape as x
    return np.where(x < 0, x.dtype.type(2) - tail, tail)  # same shape as x


def erf(x: np.ndarray) -> np.ndarray:
    """erf(x) for any real x, elementwise; absolute error below 1.2e-7 plus rounding (4e-7 in float32)."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return np.copysign(x.dtype.type(1) - erfc_nonnegative(np.abs(x)), x)  # same shape as x; odd by construction
