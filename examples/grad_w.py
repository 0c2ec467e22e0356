#!/usr/bin/env python3
"""grad_w.py — the use case dlop was asked for: the gradient of a hidden layer's weights,

    delta_o = -(x - z)
    delta_h = dlop.dot(delta_o, W) * h * (1.0 - h)
    grad_W  = dlop.dot(X.T, delta_h)

built once as a graph per dtype (float32, float64), compiled for the CPU and for CUDA, run on
the same random inputs, and compared with NumPy and with each other; then the same three lines
run eagerly on dlop arrays.  Exits non-zero when any result disagrees.

The network: X (batch, visible) -> h = sigmoid(X @ W1) (batch, hidden) -> x = h @ W.T
(batch, out), trained towards the targets z (batch, out).  W is the output layer's weights
(out, hidden), so dot(delta_o, W) is (batch, hidden) and grad_W, the gradient of W1, is
(visible, hidden).

    python examples/grad_w.py                  # CPU, and CUDA when a GPU is usable
    python examples/grad_w.py --device cuda    # CUDA required: an error without a GPU
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import dlop

BATCH, VISIBLE, HIDDEN, OUT = 64, 784, 256, 10
# Largest |difference| / largest |NumPy float64 result| allowed.  The sums run over at most
# 64 terms; float32 rounding gives ~1e-6 here, TF32 (off: dlop's default) would give ~1e-3.
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def build(dtype: str):
    """The graph: its inputs (X, x, z, W, h) and its output grad_W."""
    X = dlop.matrix("X", dtype=dtype, shape=(None, VISIBLE))
    x = dlop.matrix("x", dtype=dtype, shape=(None, OUT))
    z = dlop.matrix("z", dtype=dtype, shape=(None, OUT))
    W = dlop.matrix("W", dtype=dtype, shape=(OUT, HIDDEN))
    h = dlop.matrix("h", dtype=dtype, shape=(None, HIDDEN))
    grad_W = grad_w(X, x, z, W, h)
    return [X, x, z, W, h], grad_W


def grad_w(X, x, z, W, h):
    """The use case's three lines; X, x, z, W, h are Variables or arrays alike."""
    delta_o = -(x - z)
    delta_h = dlop.dot(delta_o, W) * h * (1.0 - h)
    return dlop.dot(X.T, delta_h)


def random_inputs(dtype: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((BATCH, VISIBLE))
    W1 = rng.standard_normal((VISIBLE, HIDDEN)) / np.sqrt(VISIBLE)
    W = rng.standard_normal((OUT, HIDDEN)) / np.sqrt(HIDDEN)
    h = 1.0 / (1.0 + np.exp(-(X @ W1)))
    x = h @ W.T
    z = rng.standard_normal((BATCH, OUT))
    return [a.astype(dtype) for a in (X, x, z, W, h)]


def reference(values: list[np.ndarray]) -> np.ndarray:
    """NumPy in float64 from the very same (possibly float32) inputs."""
    X, x, z, W, h = (v.astype(np.float64) for v in values)
    delta_o = -(x - z)
    delta_h = (delta_o @ W) * h * (1.0 - h)
    return X.T @ delta_h


def difference(result: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    """(max |difference|, that relative to max |expected|)."""
    absolute = float(np.max(np.abs(result.astype(np.float64) - expected)))
    return absolute, absolute / max(float(np.max(np.abs(expected))), np.finfo(np.float64).tiny)


def cuda_unusable_reason() -> str | None:
    try:
        dlop.asarray(np.zeros(1, dtype=np.float32), device="cuda")
    except dlop.DlopError as error:
        return str(error) or type(error).__name__
    return None


def compare(label: str, result: np.ndarray, expected: np.ndarray, dtype: str) -> bool:
    absolute, relative = difference(result, expected)
    good = relative <= TOLERANCE[dtype]
    print("  %-22s max abs diff %.3e, relative %.3e (tolerance %.0e): %s"
          % (label, absolute, relative, TOLERANCE[dtype], "OK" if good else "DISAGREE"))
    return good


def run_dtype(dtype: str, devices: list[str]) -> bool:
    inputs, grad_W = build(dtype)
    print("\n== %s: grad_W is %s %s, built once" % (dtype, grad_W.dtype, list(grad_W.shape)))
    values = random_inputs(dtype)
    expected = reference(values)
    ok = True
    results = {}
    for device in devices:
        f = dlop.function(inputs, grad_W, device=device)
        if dtype == "float32":
            print(f.explain())
        results[device] = f(*values).numpy()
        ok &= compare("%s vs NumPy" % device, results[device], expected, dtype)
    if "cpu" in results and "cuda" in results:
        ok &= compare("cpu vs cuda", results["cpu"], results["cuda"].astype(np.float64), dtype)
    for device in devices:
        # Eager: the same three lines on dlop arrays on the device, run at once.
        arrays = [dlop.asarray(v, device=device) for v in values]
        eager = grad_w(*arrays)
        ok &= compare("eager %s vs NumPy" % device, eager.numpy(), expected, dtype)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["all", "cpu", "cuda"], default="all",
                        help="all (default): the CPU, and CUDA when a GPU is usable")
    args = parser.parse_args(argv)
    devices = ["cpu"] if args.device in ("all", "cpu") else []
    if args.device in ("all", "cuda"):
        reason = cuda_unusable_reason()
        if reason is None:
            devices.append("cuda")
        elif args.device == "cuda":
            print("grad_w: --device cuda was asked for but no GPU is usable: %s" % reason,
                  file=sys.stderr)
            return 2
        else:
            print("CUDA: skipped, no GPU usable: %s" % reason)
    print("grad_W = dot(X.T, dot(-(x - z), W) * h * (1 - h)): batch %d, visible %d, hidden %d, "
          "out %d; devices: %s" % (BATCH, VISIBLE, HIDDEN, OUT, ", ".join(devices)))
    ok = True
    for dtype in ("float32", "float64"):
        ok &= run_dtype(dtype, devices)
    print("\ngrad_w:", "OK, every result agrees" if ok else "FAILED: results disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
