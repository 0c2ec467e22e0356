/* plugin_probe.h — libdlop's side of the plugin probe (plugin_probe.c): the mode (API call,
 * DLOP_PLUGIN_PROBE, default) and the settings the loader's probe runs with. */
#ifndef DLOP_PLUGIN_PROBE_H
#define DLOP_PLUGIN_PROBE_H

#include "loader.h"

/* The settings to probe a file with, or NULL when the mode in effect loads it unprobed;
 * bundled tells whether it came from the bundled plugin directory. */
const dlop__probe_settings *dlop__probe_settings_for(int bundled);

/* The dlop-probe program to run, for a program that holds the runtime itself (linked with
 * dlop_internal, as dlop-check is), where "beside libdlop" would mean beside that program.
 * Call it before the first load; later calls change nothing. */
void dlop__probe_set_program(const char *path);

/* The dlop-probe program the probe runs (dlop__probe_set_program's, else the one beside
 * libdlop), or "" when libdlop's directory cannot be determined; reads the settings once. */
const char *dlop__probe_program(void);

#endif
