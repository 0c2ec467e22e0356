"""choose_device.py — how the seed examples (double_op.py, multiply_them.py, gpu_test.py) pick
their device: the one given with --device (an error when it is a GPU and none is usable), else
cuda when a GPU is usable, else the CPU, saying so. Never a silent switch."""
import argparse
import sys

import numpy as np

import dlop


def add_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None,
                        help="cpu, cuda or cuda:N (default: cuda when a GPU is usable)")


def pick_device(program: str, asked: str | None) -> str:
    """The device to run on: the one asked for (program exits with a message if it is a GPU and
    none is usable), else cuda when a GPU is usable, else cpu, saying so."""
    if asked == "cpu":
        return "cpu"
    try:
        dlop.asarray(np.zeros(1, dtype=np.float32), device=asked or "cuda")
    except dlop.DlopError as error:
        if asked is not None:
            sys.exit("%s: --device %s was asked for but no GPU is usable: %s"
                     % (program, asked, error))
        print("%s: no GPU usable (%s); running on the CPU "
              "(pass --device cuda to require the GPU)" % (program, error))
        return "cpu"
    return asked or "cuda"
