#!/usr/bin/python3
"""Fits the polynomials of the float32 CPU erf in src/kernels/cpu/erf_f32.h.

erf(a) = a * P(a^2) on [0, 1] (degree 6), and erfc(a) * exp(a^2) = Q(1/a) on [1, 4] (degree 7),
least squares on 4000 Chebyshev points. Prints the coefficients (highest degree first) and the
largest absolute error in erf of each piece, evaluated in float64.
"""
import math

import numpy as np

nodes = np.cos(np.linspace(0.0, np.pi, 4000))
small = nodes * 0.5 + 0.5
small = small[small > 1e-6]
p = np.polyfit(small * small, [math.erf(a) / a for a in small], 6)
large = nodes * 1.5 + 2.5
q = np.polyfit(1.0 / large, [math.erfc(a) * math.exp(a * a) for a in large], 7)
p_error = max(abs(np.polyval(p, a * a) * a - math.erf(a)) for a in small)
q_error = max(abs((np.polyval(q, 1 / a) - math.erfc(a) * math.exp(a * a)) * math.exp(-a * a))
              for a in large)
print("P (a^2):", ", ".join(f"{c:.10e}f" for c in p), f"  max |error| {p_error:.2e}")
print("Q (1/a):", ", ".join(f"{c:.10e}f" for c in q), f"  max |error| {q_error:.2e}")
