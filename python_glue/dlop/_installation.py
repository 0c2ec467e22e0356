"""Which dlop installation this process runs: ``dlop.info()`` without an op name.

A Python package uses exactly one libdlop: the one of its own installation (beside it in a
wheel, in the prefix's library directory after ``cmake --install``), refused at import when its
version is not the one the extension was built for.  The bundled plugin directory is the one
beside that libdlop, so ``dlop list`` of the same installation and ``import dlop`` load the
same plugins; this report says which files and directories those are (docs/python.md)."""
from __future__ import annotations

import os

from . import _C


def installation_info() -> dict:
    """What ``dlop info`` (without an op) shows, as a dict (docs/python.md, "Which installation")."""
    bundled = _C.location("bundled_plugins")
    override = os.environ.get("DLOP_BUNDLED_PLUGINS")
    path = os.environ.get("DLOP_PLUGIN_PATH", "")
    return {
        "version": _C.version(),
        "package": os.path.dirname(os.path.abspath(__file__)),
        "extension": _C.__file__,
        "libdlop": _C.location("library"),
        "bundled_plugins": bundled,
        "bundled_plugins_from": "DLOP_BUNDLED_PLUGINS" if override is not None else "libdlop",
        "plugin_path": [entry for entry in path.split(":") if entry],
        "plugin_probe": _C.plugin_probe(),
        "probe_program": _C.location("probe_program"),
        "plugins": {plugin["name"]: plugin["path"] for plugin in _C.plugins()},
        "load_errors": list(_C.load_errors()),
    }
