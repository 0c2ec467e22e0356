"""installed_package_probe.py ROOT PLUGIN — the plugin probe from the Python package's installed
layout (what a wheel holds: ROOT/dlop/..., the "python" and "python_wheel" install components): dlop
is imported from ROOT, uses the package's own libdlop (dlop/lib), finds dlop-probe beside it
(dlop/lib/dlop/dlop-probe), and PLUGIN, whose loading
crashes, is refused with a PluginError while Python lives. Run by the ctest entry
install.python_package_plugin_probe, which checks the printed message."""
import os
import sys

root, plugin = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
import dlop  # noqa: E402

assert dlop.__file__.startswith(os.path.join(root, "dlop") + os.sep), dlop.__file__
probe = os.path.join(os.path.dirname(dlop.__file__), "lib", "dlop", "dlop-probe")
assert os.access(probe, os.X_OK), f"{probe} is missing"
# One libdlop: the package's own, and its bundled plugins and probe beside it (dlop.info()).
where = dlop.info()
package_lib = os.path.join(os.path.realpath(os.path.dirname(dlop.__file__)), "lib")
assert os.path.dirname(where["libdlop"]) == package_lib, where
assert where["bundled_plugins"] == os.path.join(package_lib, "dlop", "plugins"), where
assert where["probe_program"] == os.path.realpath(probe), where
assert dlop.plugin_probe() == "external", dlop.plugin_probe()
try:
    dlop.load_plugin(plugin)
except dlop.PluginError as error:
    print(error)
else:
    sys.exit(f"{plugin} loaded")
