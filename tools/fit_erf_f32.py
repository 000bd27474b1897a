#!/usr/bin/python3
"""Fits the polynomials of the float32 CPU erf in src/kernels/cpu/erf_f32.h.

erf(a) = a * P(a^2) on [0, 1] (degree 6), and erf(a) = R(t) with t = (a - 2.5) / 1.5 on [1, 4]
(degree 12, no division and no exponential), least squares on 4000 Chebyshev points. Prints the
coefficients (highest degree first) and the largest absolute error in erf of each piece,
evaluated in float64 and, for R, also in float32 as the kernel does (Horner in t).
"""
import math

import numpy as np

nodes = np.cos(np.linspace(0.0, np.pi, 4000))
small = nodes * 0.5 + 0.5
small = small[small > 1e-6]
p = np.polyfit(small * small, [math.erf(a) / a for a in small], 6)
large = nodes * 1.5 + 2.5
t = (large - 2.5) / 1.5
chebyshev = np.polynomial.chebyshev.chebfit(t, [math.erf(a) for a in large], 12)
r = np.polynomial.chebyshev.cheb2poly(chebyshev)[::-1]
p_error = max(abs(np.polyval(p, a * a) * a - math.erf(a)) for a in small)
r_error = max(abs(np.polyval(r, x) - math.erf(a)) for x, a in zip(t, large))
a32 = np.linspace(1.0, 4.0, 4001, dtype=np.float32)
t32 = (a32 - np.float32(2.5)) * np.float32(1.0 / 1.5)
r32 = np.full_like(t32, np.float32(r[0]))
for c in r[1:]:
    r32 = r32 * t32 + np.float32(c)
r32_error = max(abs(float(v) - math.erf(float(a))) for v, a in zip(r32, a32))
print("P (a^2):", ", ".join(f"{c:.10e}f" for c in p), f"  max |error| {p_error:.2e}")
print("R (t):", ", ".join(f"{c:.10e}f" for c in r),
      f"  max |error| {r_error:.2e} (float32 Horner {r32_error:.2e})")
