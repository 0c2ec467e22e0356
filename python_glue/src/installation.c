/* installation.c — which dlop installation the extension runs: the check at import that the
 * libdlop the dynamic linker found is the version this extension was built with (a Python
 * package works only with the libdlop of its own installation and version; LD_LIBRARY_PATH can
 * put another one first), and the locations dlop.info() reports. */
#include <limits.h>
#include <string.h>

#include "module.h"

int dlop_py_check_libdlop(PyObject *module) {
  const char *loaded = dlop_version_string();
  if (strcmp(loaded, DLOP_VERSION_STRING) == 0) return 0;
  char library[PATH_MAX];
  if (dlop_location_path(DLOP_LOCATION_LIBRARY, library, sizeof library) != DLOP_OK)
    snprintf(library, sizeof library, "(unknown file: %s)", dlop_last_error());
  PyObject *file = PyModule_GetFilenameObject(module);
  if (file == NULL) {
    PyErr_Clear();
    file = PyUnicode_FromString("dlop._C");
    if (file == NULL) return -1;
  }
  PyErr_Format(PyExc_ImportError,
               "dlop: the extension %U was built for libdlop %s but the dynamic linker loaded "
               "libdlop %s from %s: a dlop Python package runs only with the libdlop of its "
               "own installation and version (beside it in a wheel, in the prefix's library "
               "directory for `cmake --install`); unset LD_LIBRARY_PATH or remove the other "
               "libdlop from it, or reinstall the package",
               file, DLOP_VERSION_STRING, loaded, library);
  Py_DECREF(file);
  return -1;
}

/* location(name) -> str, or None when there is none: "library" (the libdlop file),
 * "bundled_plugins" (the bundled plugin directory in effect) or "probe_program". */
static PyObject *py_location(PyObject *module, PyObject *name) {
  static const struct {
    const char *name;
    int location;
  } known[] = {{"library", DLOP_LOCATION_LIBRARY},
               {"bundled_plugins", DLOP_LOCATION_BUNDLED_PLUGINS},
               {"probe_program", DLOP_LOCATION_PROBE_PROGRAM}};
  const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
  if (text == NULL) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "location() takes a str: 'library', 'bundled_plugins' "
                      "or 'probe_program'");
    return NULL;
  }
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (strcmp(text, known[i].name) != 0) continue;
    char path[PATH_MAX];
    int status = dlop_location_path(known[i].location, path, sizeof path);
    if (status == DLOP_NOT_FOUND) Py_RETURN_NONE;
    if (status != DLOP_OK) return dlop_py_raise(dlop_py_state_of_module(module), status, NULL);
    return PyUnicode_DecodeFSDefault(path);
  }
  return PyErr_Format(PyExc_ValueError, "location(): '%s' is not one of 'library', "
                      "'bundled_plugins', 'probe_program'", text);
}

PyMethodDef dlop_py_installation_methods[] = {
    {"location", py_location, METH_O,
     "location(name) -> the path of 'library' (libdlop), 'bundled_plugins' or "
     "'probe_program', or None when there is none."},
    {NULL, NULL, 0, NULL}};
