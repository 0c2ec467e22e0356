"""Raising dlop's exceptions from Python code with the same ``.status`` attribute the C
extension sets, so every error of the package looks alike."""
from __future__ import annotations

from . import _C


class UnknownOpError(_C.NotFoundError, AttributeError):
    """``dlop.ops.<name>`` for an op that is not loaded (also an AttributeError, so
    ``hasattr(dlop.ops, name)`` works)."""


def make(cls: type, status: str, message: str) -> Exception:
    """An exception of class cls carrying ``.status`` (a dlop status name)."""
    error = cls(message)
    error.status = status
    return error


def type_error(message: str) -> Exception:
    return make(_C.DlopTypeError, "DLOP_TYPE_ERROR", message)


def not_found(message: str) -> Exception:
    return make(_C.NotFoundError, "DLOP_NOT_FOUND", message)


def device_mismatch(message: str) -> Exception:
    return make(_C.DeviceMismatchError, "DLOP_DEVICE_MISMATCH", message)


def invalid(message: str) -> Exception:
    return make(_C.InvalidArgumentError, "DLOP_INVALID_ARGUMENT", message)


class ScalarOverflowError(_C.DlopTypeError, OverflowError):
    """A Python int that does not fit the array's integer dtype (``x_int8 + 1000``); also an
    OverflowError, as NumPy 2 raises for the same expression."""


def scalar_overflow(message: str) -> Exception:
    return make(ScalarOverflowError, "DLOP_TYPE_ERROR", message)
