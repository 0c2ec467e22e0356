#!/usr/bin/env python3
"""powf_tables.py — prints the tables and polynomial coefficients of elemwise_cpu_powf.c (needs
mpmath; not part of the build): 1/c and log2(c) of the 16 intervals of the mantissa split at
0.69921875 (c the interval's centre, exactly 1 for the interval holding 1), 2^(j/16), and
minimax fits (relative error, Remez exchange) of log2(1 + r) / r on |r| <= max |r| (degree 5)
and of (2^f - 1) / f on |f| <= 1/32 (degree 3, so 2^f = 1 + f P(f) is of degree 4).

    python3 plugins/elemwise/powf_tables.py
"""
import struct

import mpmath as mp

mp.mp.prec = 200
SPLIT = 0x3FE6600000000000  # the bits of 0.69921875


def double_of(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def remez(f, a, b, degree, iterations=30):
    """Coefficients (lowest first) of the polynomial of the degree with the least maximum
    relative error against f on [a, b], and that error."""
    n = degree + 2
    xs = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (n - 1 - i) / (n - 1)) for i in range(n)]
    for _ in range(iterations):
        matrix, rhs = mp.matrix(n, n), mp.matrix(n, 1)
        for i, x in enumerate(xs):
            for j in range(degree + 1):
                matrix[i, j] = x ** j
            matrix[i, degree + 1] = (-1) ** i * f(x)
            rhs[i] = f(x)
        solution = mp.lu_solve(matrix, rhs)
        coefficients = [solution[j] for j in range(degree + 1)]
        grid = [a + (b - a) * k / 2000 for k in range(2001)]
        errors = [(mp.polyval(coefficients[::-1], x) - f(x)) / f(x) for x in grid]
        extrema = [(grid[k], errors[k]) for k in range(len(grid))
                   if k in (0, len(grid) - 1) or (errors[k] - errors[k - 1]) * (errors[k + 1] - errors[k]) <= 0]
        alternating = []
        for x, e in extrema:
            if alternating and mp.sign(e) == mp.sign(alternating[-1][1]):
                if abs(e) > abs(alternating[-1][1]):
                    alternating[-1] = (x, e)
            else:
                alternating.append((x, e))
        while len(alternating) > n:
            alternating.pop(0 if abs(alternating[0][1]) < abs(alternating[-1][1]) else -1)
        if len(alternating) < n:
            break
        xs = [x for x, _ in alternating]
    return coefficients, max(abs(e) for _, e in extrema)


def main():
    inv_c, log2_c, r_max = [], [], mp.mpf(0)
    for i in range(16):
        low, high = double_of(SPLIT + (i << 48)), double_of(SPLIT + ((i + 1) << 48))
        inverse = 1.0 if low <= 1.0 < high else float(2 / (mp.mpf(low) + mp.mpf(high)))
        inv_c.append(inverse)
        log2_c.append(float(-mp.log(mp.mpf(inverse), 2)))
        r_max = max(r_max, abs(mp.mpf(low) * inverse - 1), abs(mp.mpf(high) * inverse - 1))
    print(f"/* max |r| = {float(r_max):.5f} */")
    print("POWF_INV_C", ", ".join(v.hex() for v in inv_c))
    print("POWF_LOG2_C", ", ".join(v.hex() for v in log2_c))
    print("POWF_EXP2_J", ", ".join(float(mp.power(2, mp.mpf(j) / 16)).hex() for j in range(16)))
    q, error = remez(lambda r: mp.log1p(r) / r / mp.log(2) if r != 0 else 1 / mp.log(2), -r_max, r_max, 5)
    print(f"POWF_Q (relative error 2^{float(mp.log(error, 2)):.1f})", ", ".join(float(c).hex() for c in q))
    p, error = remez(lambda t: mp.expm1(t * mp.log(2)) / t if t != 0 else mp.log(2),
                     -mp.mpf(1) / 32, mp.mpf(1) / 32, 3)
    print(f"POWF_P (relative error of f P(f) 2^{float(mp.log(error / 32, 2)):.1f})",
          ", ".join(float(c).hex() for c in p))


if __name__ == "__main__":
    main()
