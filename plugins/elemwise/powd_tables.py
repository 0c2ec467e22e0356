#!/usr/bin/env python3
"""powd_tables.py — prints the tables of elemwise_cpu_powd.c (Python's decimal module at 80
digits; not part of the build).

log: z = x / 2^k in [OFF, 2 OFF) with OFF the double of bits 0x3fe6400000000000 (0.6953125),
the top 5 mantissa bits of the bits of x minus OFF's pick one of 32 intervals (2^-6 wide below
1, 2^-5 above; the interval holding 1 is [1 - 2^-7, 1 + 2^-6)); per interval invc = 1/c in
double (c its centre; exactly 1 for the interval holding 1), and -log(invc) of that double as
logc + logctail with logc a multiple of 2^-42, so that k ln2hi + logc is exact for |k| < 2^11.
ln2/32 likewise, so that kd ln2hi/32 is exact for |kd| < 2^16.
exp: 2^(j/32) = T[j] (1 + tail[j]) for j in 0..31.

    python3 plugins/elemwise/powd_tables.py
"""
import struct
from decimal import Decimal, getcontext
from fractions import Fraction

getcontext().prec = 80
OFF = 0x3FE6400000000000
LOG_BITS = 5  # 32 intervals
ONE = 0x3FF0000000000000


def double_of(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def to_decimal(f):
    return Decimal(f.numerator) / Decimal(f.denominator)


def round_multiple(d, quantum):
    """Decimal d rounded to the nearest multiple of the Fraction quantum, as a Fraction."""
    q = (d / to_decimal(quantum)).to_integral_value()
    return Fraction(int(q)) * quantum


def hexd(f):
    return float(f).hex()


def log_tables():
    invc, logc, logctail = [], [], []
    worst_r = Fraction(0)
    for i in range(1 << LOG_BITS):
        shift = 52 - LOG_BITS
        lo_bits, hi_bits = OFF + (i << shift), OFF + ((i + 1) << shift)
        lo = Fraction(double_of(lo_bits))
        hi = Fraction(double_of(hi_bits))
        if lo_bits <= ONE < hi_bits:
            inv = Fraction(1)
        else:
            inv = Fraction(float(1 / ((lo + hi) / 2)))
        for z in (lo, hi):
            worst_r = max(worst_r, abs(Fraction(float(z * inv)) - 1))
        minus_log = -to_decimal(inv).ln()
        hi_part = round_multiple(minus_log, Fraction(1, 2 ** 42))
        tail = Fraction(float(minus_log - to_decimal(hi_part)))
        invc.append(inv)
        logc.append(hi_part)
        logctail.append(tail)
    return invc, logc, logctail, worst_r


def exp_tables():
    t, tail = [], []
    for j in range(32):
        v = (Decimal(2).ln() * j / 32).exp()
        h = Fraction(float(v))
        t.append(h)
        tail.append(Fraction(float((v - to_decimal(h)) / to_decimal(h))))
    return t, tail


def c_array(name, values, per_line=3):
    lines = [f"static const double {name}[{len(values)}] = {{"]
    row = []
    for v in values:
        row.append(hexd(v) if v != 0 else "0x0.0p+0")
        if len(row) == per_line:
            lines.append("    " + ", ".join(row) + ",")
            row = []
    if row:
        lines.append("    " + ", ".join(row) + ",")
    lines.append("};")
    return "\n".join(lines)


def main():
    invc, logc, logctail, worst_r = log_tables()
    t, tail = exp_tables()
    ln2 = Decimal(2).ln()
    ln2hi = round_multiple(ln2, Fraction(1, 2 ** 42))
    ln2lo = Fraction(float(ln2 - to_decimal(ln2hi)))
    ln2n = ln2 / 32
    ln2nhi = round_multiple(ln2n, Fraction(1, 2 ** 42))  # kd (16 bits) times it is exact
    ln2nlo = Fraction(float(ln2n - to_decimal(ln2nhi)))
    print(f"/* max |r| = {float(worst_r):.6g} (2^{float(worst_r).hex()}) */")
    print(f"#define POWD_LN2_HI {hexd(ln2hi)}\n#define POWD_LN2_LO {hexd(ln2lo)}")
    print(f"#define POWD_INV_LN2_N {float(32 / ln2).hex()}")
    print(f"#define POWD_LN2_N_HI {hexd(ln2nhi)}\n#define POWD_LN2_N_LO {hexd(ln2nlo)}")
    print(c_array("POWD_INV_C", invc))
    print(c_array("POWD_LOG_C", logc))
    print(c_array("POWD_LOG_C_TAIL", logctail))
    print(c_array("POWD_EXP2_J", t))
    print(c_array("POWD_EXP2_J_TAIL", tail))


if __name__ == "__main__":
    main()
