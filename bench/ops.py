#!/usr/bin/env python3
"""ops.py — every bundled op on one device against NumPy (CPU) or PyTorch (GPU), op by op, one run.

Each row is one op of the bundled plugins (elemwise: every unary, binary and comparison op, where,
cast, pow; reduce: sum, mean, max, min over all axes, the last, the first and the middle axis of a
3-d tensor; shape: the views and a reshape that copies; blas: dot, matmul, gemm; the seed ops
double, multiply_them, exp) x dtype x size, and the figure is reference time / dlop time (above
1: dlop is faster). What is timed, on both sides:

- dlop: the compiled one-op function (`dlop.function([inputs], op(inputs), device)`) called on
  dlop.Arrays made beforehand. Its output comes from dlop's memory pool, which hands the same
  cached buffer back call after call: dlop's equivalent of `out=` (no page faults, no memset).
- NumPy / PyTorch: the same operation with `out=` preallocated wherever the call takes one
  (`np.tanh(x, out=y)`, `torch.sum(x, dim=1, out=y)`, ...). Where it has no `out=` the row says
  so in its label: NumPy's `where` allocates; `sigmoid` on NumPy is 1/(1+exp(-x)) in four
  in-place ufunc passes (NumPy has no sigmoid); gemm on NumPy is matmul then alpha and beta
  in place; the views (transpose, dimshuffle, reshape of a contiguous input, broadcast_to) are
  O(1) on both sides, so their rows compare the cost of one call, not a throughput.

Every dlop result is checked against the reference before it is timed (exact where both sides
round once or copy bits, within a stated tolerance otherwise); a mismatch prints WRONG and the
run exits 1. Timing: the CPU takes the median over samples of back-to-back calls with the
samples of dlop and the reference interleaved (bench/cpu_timing.py); the GPU the same with
torch.cuda.synchronize() (a device-wide synchronize: it waits for dlop's streams too) before and
after each sample of many calls, so launch cost counts where kernels are short.

CPU rows come with the default thread count (dlop's parallel_for uses DLOP_NUM_THREADS, default
the online CPUs; NumPy's ufuncs use one thread, its BLAS its own pool) and again with one thread
(DLOP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 for both sides, measured in a child process
because dlop reads the variable once).

    PYTHONPATH=build/python build/venv/bin/python bench/ops.py [--device cpu|cuda] [--quick]
        [--sizes 16 20 24] [--ops tanh,reduce] [--dtypes float32] [--json FILE]
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_timing import alternating_medians  # noqa: E402

import dlop  # noqa: E402

CPU_DTYPES = ["float32", "float64"]
GPU_DTYPES = ["float16", "bfloat16", "float32", "float64"]
CPU_SIZES = [16, 20, 24]
GPU_SIZES = [16, 20, 26]
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


# ---- the cases ------------------------------------------------------------------------------

@dataclasses.dataclass
class Setup:
    """One row's inputs and calls. inputs: host values (float64, converted to the row's dtype;
    bool and int32 arrays kept as they are), each with a C-contiguous layout unless a transpose
    is asked for (transposed[k]). build: the dlop graph over input Variables. numpy/torch: the
    reference over the library's arrays and its preallocated output (None: it allocates).
    out: (shape, dtype) of that output, dtype None meaning the row's dtype. check: 'exact',
    'math' (a few ulp), 'sum' (within eps * sum|x| * log2 of the count), 'blas'."""
    inputs: list
    build: Callable
    numpy: Callable
    torch: Callable | None
    out: tuple | None
    check: str = "exact"
    transposed: tuple = ()
    count: int = 1  # elements per reduction (check 'sum')


@dataclasses.dataclass
class Case:
    group: str
    label: str
    op: str
    make: Callable[[np.random.Generator, int, str], Setup]
    dtypes: tuple | None = None  # None: every dtype of the device


# Host inputs are drawn once per size and reused by every case and dtype that asks for the same
# range (at 2^26 a draw costs as much as timing a row): key (n, low, high, k-th draw of a case).
_VALUES: dict = {}
_DRAWS = [0]


def uniform(rng, n, low=-5.0, high=5.0):
    key = (n, low, high, _DRAWS[0])
    _DRAWS[0] += 1
    if key not in _VALUES:
        _VALUES[key] = rng.uniform(low, high, n)
    return _VALUES[key]


def derived(name, fn, *arrays):
    """fn(*arrays), kept with the inputs it came from (for the GPU's cache of device copies,
    keyed by data address, every input must live in _VALUES)."""
    key = (name,) + tuple(a.__array_interface__["data"][0] for a in arrays)
    if key not in _VALUES:
        _VALUES[key] = fn(*arrays)
    return _VALUES[key]


def integers(rng, n, low, high):
    key = (n, "integers", low, high, _DRAWS[0])
    _DRAWS[0] += 1
    if key not in _VALUES:
        _VALUES[key] = rng.integers(low, high, n).astype(np.float64)
    return _VALUES[key]


def shape3(n: int) -> tuple:
    """A 3-d shape of n = 2^k elements: (2^(k//3), 2^(k - 2(k//3)), 2^(k//3))."""
    k = int(math.log2(n))
    a = k // 3
    return (1 << a, 1 << (k - 2 * a), 1 << a)


def square(n: int) -> int:
    return 1 << (int(math.log2(n)) // 2)


def unary(label, op, numpy_fn, torch_fn, low=-5.0, high=5.0, check="math"):
    def make(rng, n, dtype):
        return Setup([uniform(rng, n, low, high)], lambda x: getattr(dlop.ops, op)(x),
                     numpy_fn, torch_fn, ((n,), None), check)
    return Case("elemwise", label, op, make)


def binary(label, op, numpy_fn, torch_fn, check="exact", a_range=(-5, 5), b_range=(-5, 5),
           integral=False):
    def make(rng, n, dtype):
        if integral:  # integer-valued floats, so that equal and not_equal see both answers
            a, b = integers(rng, n, -8, 8), integers(rng, n, -8, 8)
        else:
            a, b = uniform(rng, n, *a_range), uniform(rng, n, *b_range)
        out_dtype = "bool" if integral else None
        return Setup([a, b], lambda x, y: getattr(dlop.ops, op)(x, y), numpy_fn, torch_fn,
                     ((n,), out_dtype), check)
    return Case("elemwise", label, op, make)


def numpy_sigmoid(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    np.add(out, 1, out=out)
    np.reciprocal(out, out=out)


def where_case():
    def make(rng, n, dtype):
        x, y = uniform(rng, n), uniform(rng, n)
        return Setup([derived("x > y", np.greater, x, y), x, y], lambda c, a, b: dlop.ops.where(c, a, b),
                     lambda c, a, b, out: np.where(c, a, b),
                     lambda c, a, b, out: torch_mod().where(c, a, b, out=out), ((n,), None))
    return Case("elemwise", "where(c, x, y) (NumPy allocates)", "where", make)


def cast_case(target, label=None):
    def make(rng, n, dtype):
        scale = 1000.0 if target == "int32" else 5.0
        x = uniform(rng, n, -scale, scale)
        return Setup([x], lambda v: dlop.ops.cast(v, dtype=target),
                     lambda v, out: np.copyto(out, v, casting="unsafe"),
                     lambda v, out: out.copy_(v), ((n,), target))
    return Case("elemwise", label or f"cast -> {target}", "cast", make)


def reduce_case(op, where_label, axes):
    """op over axes (() = all) of a 3-d tensor of n elements."""
    np_fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op]
    torch_name = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}[op]

    def make(rng, n, dtype):
        shape = shape3(n)
        x = uniform(rng, n).reshape(shape)
        out_shape = tuple(s for d, s in enumerate(shape) if axes and d not in axes)
        np_axis = tuple(axes) if axes else None
        dims = tuple(axes) if axes else (0, 1, 2)
        count = math.prod(shape[d] for d in dims)
        return Setup([x], lambda v: getattr(dlop.ops, op)(v, axes=list(axes)),
                     lambda v, out: np_fn(v, axis=np_axis, out=out),
                     lambda v, out: getattr(torch_mod(), torch_name)(v, dim=dims, out=out),
                     (out_shape, None), "sum" if op in ("sum", "mean") else "exact", count=count)
    return Case("reduce", f"{op} {where_label}", op, make)


def dot_case():
    def make(rng, n, dtype):
        a, b = uniform(rng, n), uniform(rng, n)
        return Setup([a, b], lambda x, y: dlop.ops.dot(x, y), lambda x, y, out: np.dot(x, y),
                     lambda x, y, out: torch_mod().dot(x, y, out=out), ((), None), "blas")
    return Case("blas", "dot (n)·(n) (NumPy returns a scalar)", "dot", make)


def matmul_case():
    def make(rng, n, dtype):
        s = square(n)
        a, b = uniform(rng, s * s).reshape(s, s), uniform(rng, s * s).reshape(s, s)
        return Setup([a, b], lambda x, y: dlop.ops.matmul(x, y),
                     lambda x, y, out: np.matmul(x, y, out=out),
                     lambda x, y, out: torch_mod().matmul(x, y, out=out), ((s, s), None), "blas")
    return Case("blas", "matmul (s,s)@(s,s), s*s = n", "matmul", make)


def gemm_case():
    def make(rng, n, dtype):
        s = square(n)
        a, b, c = (uniform(rng, s * s).reshape(s, s) for _ in range(3))

        def numpy_gemm(x, y, z, out):
            np.matmul(x, y, out=out)
            out *= 1.5
            out += 0.5 * z  # one temporary of c's size

        return Setup([a, b, c], lambda x, y, z: dlop.ops.gemm(x, y, z, alpha=1.5, beta=0.5),
                     numpy_gemm,
                     lambda x, y, z, out: torch_mod().addmm(z, x, y, beta=0.5, alpha=1.5, out=out),
                     ((s, s), None), "blas")
    return Case("blas", "gemm 1.5 a@b + 0.5 c (NumPy: matmul, *=, +=)", "gemm", make)


def shape_cases():
    def transpose(rng, n, dtype):
        x = uniform(rng, n).reshape(shape3(n))
        return Setup([x], lambda v: dlop.ops.transpose(v), lambda v, out: np.transpose(v),
                     lambda v, out: v.permute(2, 1, 0), None)

    def dimshuffle(rng, n, dtype):
        x = uniform(rng, n).reshape(shape3(n))
        return Setup([x], lambda v: dlop.ops.dimshuffle(v, pattern=[2, -1, 0, 1]),
                     lambda v, out: np.expand_dims(np.transpose(v, (2, 0, 1)), 1),
                     lambda v, out: v.permute(2, 0, 1).unsqueeze(1), None)

    def reshape_view(rng, n, dtype):
        x = uniform(rng, n).reshape(shape3(n))
        return Setup([x], lambda v: dlop.ops.reshape(v, shape=[-1]), lambda v, out: v.reshape(-1),
                     lambda v, out: v.reshape(-1), None)

    def reshape_copy(rng, n, dtype):
        x = uniform(rng, n).reshape(shape3(n))  # passed transposed: reshape must copy

        def numpy_copy(v, out):
            np.copyto(out.reshape(v.shape), v)

        def torch_copy(v, out):
            out.view(v.shape).copy_(v)

        return Setup([x], lambda v: dlop.ops.reshape(v, shape=[-1]), numpy_copy, torch_copy,
                     ((n,), None), transposed=(True,))

    def broadcast(rng, n, dtype):
        s = square(n)
        x = uniform(rng, s)
        return Setup([x], lambda v: dlop.ops.broadcast_to(v, shape=[s, s]),
                     lambda v, out: np.broadcast_to(v, (s, s)), lambda v, out: v.expand(s, s), None)

    return [Case("shape", "transpose (view)", "transpose", transpose),
            Case("shape", "dimshuffle (view)", "dimshuffle", dimshuffle),
            Case("shape", "reshape (view)", "reshape", reshape_view),
            Case("shape", "reshape of a transposed input (copy)", "reshape", reshape_copy),
            Case("shape", "broadcast_to (s,) -> (s,s) (view)", "broadcast_to", broadcast)]


def row_broadcast_case():
    def make(rng, n, dtype):
        s = square(n)
        a, row = uniform(rng, n).reshape(n // s, s), uniform(rng, s)
        return Setup([a, row], lambda x, y: dlop.ops.add(x, y),
                     lambda x, y, out: np.add(x, y, out=out),
                     lambda x, y, out: torch_mod().add(x, y, out=out), ((n // s, s), None))
    return Case("elemwise", "add (R,C)+(C,) row broadcast", "add", make)


def seed_cases():
    def double(rng, n, dtype):
        return Setup([uniform(rng, n)], lambda x: dlop.ops.double(x),
                     lambda x, out: np.multiply(x, 2, out=out),
                     lambda x, out: torch_mod().mul(x, 2, out=out), ((n,), None))

    def multiply_them(rng, n, dtype):
        return Setup([uniform(rng, n), uniform(rng, n)], lambda x, y: dlop.ops.multiply_them(x, y),
                     lambda x, y, out: np.multiply(x, y, out=out),
                     lambda x, y, out: torch_mod().mul(x, y, out=out), ((n,), None))

    def exp(rng, n, dtype):
        return Setup([uniform(rng, n)], lambda x: dlop.ops.exp(x),
                     lambda x, out: np.exp(x, out=out),
                     lambda x, out: torch_mod().exp(x, out=out), ((n,), None), "math")

    return [Case("seed", "double", "double", double),
            Case("seed", "multiply_them", "multiply_them", multiply_them),
            Case("seed", "exp", "exp", exp)]


def torch_mod():
    import torch
    return torch


def t(name):
    """torch.<name>(*inputs, out=out), looked up when called (torch is imported on the GPU only)."""
    return lambda *args, out: getattr(torch_mod(), name)(*args, out=out)


def all_cases() -> list[Case]:
    cases = [
        unary("neg", "neg", lambda x, out: np.negative(x, out=out), t("neg"), check="exact"),
        unary("abs", "abs", lambda x, out: np.abs(x, out=out), t("abs"), check="exact"),
        unary("log (x in [0.01, 100))", "log", lambda x, out: np.log(x, out=out), t("log"), 0.01, 100),
        unary("sqrt (x in [0, 100))", "sqrt", lambda x, out: np.sqrt(x, out=out), t("sqrt"), 0, 100,
              check="exact"),
        unary("tanh", "tanh", lambda x, out: np.tanh(x, out=out), t("tanh")),
        unary("sigmoid (NumPy: 4 ufunc passes)", "sigmoid", numpy_sigmoid, t("sigmoid"), -20, 20),
    ]
    for op, np_name, torch_name in [("add", "add", "add"), ("sub", "subtract", "sub"),
                                    ("mul", "multiply", "mul"), ("div", "divide", "div"),
                                    ("maximum", "maximum", "maximum"),
                                    ("minimum", "minimum", "minimum")]:
        fn = getattr(np, np_name)
        cases.append(binary(op, op, lambda a, b, out, fn=fn: fn(a, b, out=out), t(torch_name)))
    cases.append(binary("pow (a in [0.5, 2), b in [-3, 3))", "pow",
                        lambda a, b, out: np.power(a, b, out=out), t("pow"), "math", (0.5, 2),
                        (-3, 3)))
    cases.append(row_broadcast_case())
    for op, np_name, torch_name in [("equal", "equal", "eq"), ("not_equal", "not_equal", "ne"),
                                    ("less", "less", "lt"), ("less_equal", "less_equal", "le"),
                                    ("greater", "greater", "gt"),
                                    ("greater_equal", "greater_equal", "ge")]:
        fn = getattr(np, np_name)
        cases.append(binary(op, op, lambda a, b, out, fn=fn: fn(a, b, out=out), t(torch_name),
                            integral=True))
    cases.append(where_case())
    cases.append(cast_case("float64", "cast -> float64 (float32 rows)"))
    cases.append(cast_case("float32", "cast -> float32 (float64 rows)"))
    cases[-2].dtypes = ("float16", "bfloat16", "float32")
    cases[-1].dtypes = ("float64",)
    cases.append(cast_case("int32"))
    cases.append(cast_case("int64"))
    cases.append(cast_case("float16"))
    for op in ("sum", "mean", "max", "min"):
        for label, axes in [("all axes", ()), ("last axis", (2,)), ("first axis", (0,)),
                            ("middle axis", (1,))]:
            cases.append(reduce_case(op, label, axes))
    cases += [dot_case(), matmul_case(), gemm_case()]
    cases += shape_cases()
    cases += seed_cases()
    return cases


# ---- devices --------------------------------------------------------------------------------

class CpuSide:
    name = "cpu"
    reference = "NumPy"

    def array(self, values, dtype, transposed=False):
        a = values if values.dtype in (np.bool_, np.int32) else values.astype(dtype)
        if transposed:
            a = np.ascontiguousarray(a.T).T  # same values, reversed strides
        return a

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def to_host(self, x):
        return np.asarray(x).astype(np.float64) if np.asarray(x).dtype != np.bool_ else np.asarray(x)

    def dlop_input(self, a):
        return dlop.asarray(a)

    def dlop_to_host(self, r):
        return self.to_host(np.asarray(r))

    def sync(self):
        pass


class CudaSide:
    name = "cuda"
    reference = "PyTorch"

    def __init__(self):
        import torch
        self.torch = torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        self.cache = {}  # device copies of the host inputs, for the current size

    def dtype(self, name):
        return {"bool": self.torch.bool, "int32": self.torch.int32}.get(name) or getattr(self.torch, name)

    def array(self, values, dtype, transposed=False):
        # every input's data lives in _VALUES for the size, so its address names its contents
        key = (values.__array_interface__["data"][0], values.shape, values.strides, dtype, transposed)
        if key not in self.cache:
            self.cache[key] = self.upload(values, dtype, transposed)
        return self.cache[key]

    def upload(self, values, dtype, transposed):
        torch = self.torch
        if values.dtype in (np.bool_, np.int32):
            a = torch.from_numpy(values).cuda()
        else:
            a = torch.from_numpy(values).to("cuda").to(self.dtype(dtype))
        if transposed:
            a = a.permute(*reversed(range(a.ndim))).contiguous().permute(*reversed(range(a.ndim)))
        return a

    def empty(self, shape, dtype):
        return self.torch.empty(shape, dtype=self.dtype(dtype), device="cuda")

    def to_host(self, x):
        x = x.cpu()
        return x.numpy() if x.dtype == self.torch.bool else x.double().numpy()

    def dlop_input(self, a):
        return dlop.asarray(a)

    def dlop_to_host(self, r):
        return self.to_host(self.torch.from_dlpack(r))

    def sync(self):
        self.torch.cuda.synchronize()


def check(setup: Setup, dtype: str, got, want, inputs_host) -> str | None:
    """None when got matches want, else what differs."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if setup.check == "exact":
        ok = np.array_equal(got, want, equal_nan=True)
        return None if ok else f"max |diff| {np.nanmax(np.abs(got.astype(float) - want)):.3g} (exact expected)"
    eps = EPS.get(dtype, 2.0 ** -52)
    if setup.check == "math":
        tol = 16 * eps
        ok = np.allclose(got, want, rtol=tol, atol=tol * 1e-30, equal_nan=True)
        return None if ok else f"max rel diff {np.nanmax(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)):.3g} > {tol:.3g}"
    if setup.check == "sum":
        scale = np.abs(inputs_host[0]).max() * setup.count
        tol = 4 * eps * scale * max(1.0, math.log2(setup.count))
        err = np.abs(got - want).max() if got.size else 0.0
        return None if err <= tol else f"max |diff| {err:.3g} > {tol:.3g}"
    tol = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-4}.get(dtype, 1e-11)
    scale = np.abs(want).max() if want.size else 1.0
    err = np.abs(got - want).max() if got.size else 0.0
    return None if err <= tol * scale else f"max |diff| {err:.3g} > {tol * scale:.3g}"


def numpy_check(setup: Setup, dtype: str, got, lib_inputs, side, host) -> str | None:
    """check() of a GPU result against NumPy on the same (host) inputs, or why it cannot be."""
    try:
        host_inputs = [side.to_host(a) for a in lib_inputs]
        # the output in the op's own dtype (got comes back widened to float64): NumPy rounds
        # into it, so a cast is compared with NumPy's rounding, not with a float64 copy
        out_dtype = (setup.out[1] if setup.out and setup.out[1] else None) or dtype
        out = np.empty(np.shape(got), np.dtype(out_dtype))
        result = setup.numpy(*host_inputs, out=out)
        return check(setup, dtype, got, result if result is not None else out, host)
    except Exception as e:  # a reference NumPy cannot run on these dtypes: no second opinion
        return f"no NumPy reference: {e}"


def run_case(side, case: Case, setup: Setup, dtype: str, n: int, args) -> dict:
    host = setup.inputs
    transposed = setup.transposed or (False,) * len(host)
    lib_inputs = [side.array(v, dtype, tr) for v, tr in zip(host, transposed)]
    variables = [dlop.tensor(f"in{k}", dtype=("bool" if v.dtype == np.bool_ else dtype),
                             shape=(None,) * v.ndim) for k, v in enumerate(host)]
    f = dlop.function(variables, setup.build(*variables), device=side.name)
    ours = [side.dlop_input(a) for a in lib_inputs]
    out = None
    if setup.out is not None:
        shape, out_dtype = setup.out
        out = side.empty(shape, out_dtype or dtype)
    result = f(*ours)
    side.sync()
    got = side.dlop_to_host(result)
    del result
    reference = setup.numpy if side.name == "cpu" else setup.torch
    ref_result = reference(*lib_inputs, out=out)
    side.sync()
    # np.dot returns a scalar, np.copyto and the composite references return None
    want = side.to_host(ref_result if ref_result is not None else out)
    problem = check(setup, dtype, got, want, host)
    row = {"group": case.group, "case": case.label, "op": case.op, "dtype": dtype, "n": n,
           "shape": list(np.shape(host[0])), "device": side.name}
    if problem and side.name == "cuda" and setup.check == "exact":
        # PyTorch's CUDA casts from float64 to float16/bfloat16 round through float32 (twice):
        # dlop rounds once, as NumPy does. Such a row is right when it matches NumPy.
        numpy_problem = numpy_check(setup, dtype, got, lib_inputs, side, host)
        if numpy_problem is None:
            row["note"] = f"torch differs ({problem}); dlop matches NumPy exactly"
            problem = None
    if problem:
        row["check"] = f"WRONG: {problem}"
        return row
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    t_dlop, t_ref = alternating_medians([lambda: f(*ours), lambda: reference(*lib_inputs, out=out)],
                                        args.seconds, args.samples, side.sync, clock)
    row.update(check="ok", dlop_s=t_dlop, ref_s=t_ref, ratio=t_ref / t_dlop)
    return row


def selected(case: Case, filters: list[str]) -> bool:
    if not filters:
        return True
    text = f"{case.group} {case.op} {case.label}"
    return any(f == case.op or f == case.group or f in text for f in filters)


def measure(args) -> list[dict]:
    side = CudaSide() if args.device == "cuda" else CpuSide()
    rows = []
    rng = np.random.default_rng(16)
    for log2 in args.sizes:
        n = 1 << log2
        _VALUES.clear()  # one size's inputs at a time
        if side.name == "cuda":
            side.cache.clear()
        for case in all_cases():
            if not selected(case, args.ops):
                continue
            for dtype in args.dtypes:
                if case.dtypes is not None and dtype not in case.dtypes:
                    continue
                if case.group == "blas" and side.name == "cpu" and dtype not in ("float32", "float64"):
                    continue
                _DRAWS[0] = 0
                setup = case.make(rng, n, dtype)
                try:
                    row = run_case(side, case, setup, dtype, n, args)
                except (dlop.DlopError, RuntimeError, TypeError, ValueError) as error:
                    row = {"group": case.group, "case": case.label, "op": case.op, "dtype": dtype,
                           "n": n, "device": side.name, "check": f"ERROR: {type(error).__name__}: {error}"}
                rows.append(row)
                if args.progress:
                    print(format_row(row, None), file=sys.stderr, flush=True)
    return rows


# ---- output ---------------------------------------------------------------------------------

def format_cell(row: dict | None) -> str:
    if row is None:
        return f"{'':>10} {'':>10} {'':>7}"
    if row.get("check") != "ok":
        return f"{row.get('check', '?')}"
    flag = "*" if row["ratio"] < 1.0 else " "
    return f"{row['dlop_s'] * 1e6:>10.1f} {row['ref_s'] * 1e6:>10.1f} {row['ratio']:>6.2f}{flag}"


def format_row(row: dict, one: dict | None) -> str:
    label = f"{row['case'][:44]:44} {row['dtype']:8} 2^{int(math.log2(row['n'])):<3}"
    note = f"  ({row['note']})" if row.get("note") else ""
    return f"{label} {format_cell(row)}   {format_cell(one) if one is not None else ''}{note}"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.platform()}"


def header(args, reference_version: str) -> list[str]:
    threads = os.environ.get("DLOP_NUM_THREADS") or f"{os.cpu_count()} (the online CPUs)"
    lines = [f"bench/ops.py {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
             f"dlop {dlop.version()}, {reference_version}, {machine()}",
             "dlop: compiled one-op function (dlop.function) on dlop.Arrays, output from its pool; "
             + ("NumPy" if args.device == "cpu" else "PyTorch")
             + ": the same call with out= preallocated unless the label says otherwise",
             "ratio = reference time / dlop time (above 1: dlop faster; * below 1); "
             f"median of {args.samples} interleaved samples, ~{args.seconds:g} s per side and point"]
    if args.device == "cpu":
        lines.append(f"threads: dlop DLOP_NUM_THREADS={threads}; NumPy ufuncs one; right columns: "
                     "DLOP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (both sides)")
    ref = "numpy" if args.device == "cpu" else "torch"
    left = "default threads" if args.device == "cpu" else "cuda:0"
    lines.append(f"{'case':44} {'dtype':8} {'n':5} {left + ': dlop us':>21} {ref + ' us':>10} "
                 f"{'ratio':>7}" + (f"   {'1 thread: dlop us':>18} {ref + ' us':>10} {'ratio':>7}"
                                     if "1" in args.threads and args.device == "cpu" else ""))
    return lines


def child_rows(args) -> list[dict]:
    """The one-thread rows, measured by a child process with the thread variables set."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "one.json")
        command = [sys.executable, os.path.abspath(__file__), "--device", "cpu", "--threads",
                   "default", "--json", path, "--seconds", str(args.seconds), "--samples",
                   str(args.samples), "--sizes", *map(str, args.sizes), "--dtypes", *args.dtypes,
                   "--clock", args.clock, "--quiet"]
        if args.ops:
            command += ["--ops", ",".join(args.ops)]
        env = dict(os.environ, DLOP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        subprocess.run(command, env=env, check=False)
        if not os.path.exists(path):
            print("ops.py: the one-thread child wrote no results", file=sys.stderr)
            return []
        with open(path) as file:
            return json.load(file)["rows"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--sizes", type=int, nargs="+", help="log2 of the element counts "
                        "(default: 16 20 24 on the CPU, 16 20 26 on the GPU)")
    parser.add_argument("--dtypes", nargs="+", help="default: float32 float64 on the CPU, "
                        "float16 bfloat16 float32 float64 on the GPU")
    parser.add_argument("--ops", type=lambda s: [p for p in s.split(",") if p], default=[],
                        help="comma list: op names (tanh), groups (elemwise, reduce, blas, shape, "
                             "seed) or text of a row's label (\"first axis\")")
    parser.add_argument("--threads", default="default,1",
                        help="CPU thread configurations: default, 1 or both (default,1)")
    parser.add_argument("--quick", action="store_true",
                        help="2^16 and 2^20 only, shorter samples: a smoke run")
    parser.add_argument("--seconds", type=float, default=None, help="time per point and side (0.2)")
    parser.add_argument("--samples", type=int, default=None, help="samples per point (5)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: the process's CPU time instead of the wall clock, for "
                             "one-thread runs on a machine busy with other work (a multithreaded "
                             "call would count every thread's time)")
    parser.add_argument("--json", help="write the rows and the run's description here")
    parser.add_argument("--progress", action="store_true", help="print each row to stderr as it is done")
    parser.add_argument("--quiet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.threads = [p for p in args.threads.split(",") if p]
    if args.sizes is None:
        args.sizes = [16, 20] if args.quick else (CPU_SIZES if args.device == "cpu" else GPU_SIZES)
    args.dtypes = args.dtypes or (CPU_DTYPES if args.device == "cpu" else GPU_DTYPES)
    gpu = args.device == "cuda"  # GPU timings are steadier: shorter samples suffice
    args.seconds = args.seconds if args.seconds is not None else (
        (0.02 if gpu else 0.05) if args.quick else (0.1 if gpu else 0.2))
    args.samples = args.samples if args.samples is not None else (3 if args.quick else 5)

    if args.device == "cuda":
        try:
            import torch
        except ImportError as error:
            print(f"SKIP: PyTorch is not importable ({error}): the GPU table compares with torch")
            return 0
        if not torch.cuda.is_available() or dlop.cuda_device_count() < 1:
            print("SKIP: no usable CUDA device (torch.cuda.is_available() is "
                  f"{torch.cuda.is_available()}, dlop sees {dlop.cuda_device_count()})")
            return 0
        reference_version = f"PyTorch {torch.__version__}, {torch.cuda.get_device_name(0)}"
        args.threads = ["default"]
    else:
        reference_version = f"NumPy {np.__version__}"

    rows = measure(args) if "default" in args.threads else []
    one = child_rows(args) if args.device == "cpu" and "1" in args.threads else []
    for row in one:
        row["threads"] = "1"
    for row in rows:
        row["threads"] = "default"
    if not rows:  # only the one-thread configuration was asked for
        rows, one = one, []

    if not args.quiet:
        print("\n".join(header(args, reference_version)))
        key = lambda r: (r["case"], r["dtype"], r["n"])  # noqa: E731
        by_key = {key(r): r for r in one}
        for row in rows:
            print(format_row(row, by_key.get(key(row))), flush=True)
    every = rows + one
    wrong = [r for r in every if r.get("check") != "ok"]
    below = [r for r in every if r.get("check") == "ok" and r["ratio"] < 1.0]
    if not args.quiet:
        print(f"{len(every)} points, {len(below)} below 1.0, {len(wrong)} wrong or failed")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"header": header(args, reference_version), "device": args.device,
                       "reference": reference_version, "machine": machine(), "rows": every},
                      file, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
