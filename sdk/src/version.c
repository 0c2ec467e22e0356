/* version.c — the runtime version queries, so a program can tell which libdlop it loaded
 * (the macros in dlop/version.h tell which headers it was compiled against). */
#include "internal.h"

unsigned dlop_version(void) {
  return ((unsigned)DLOP_VERSION_MAJOR << 16) | ((unsigned)DLOP_VERSION_MINOR << 8) |
         (unsigned)DLOP_VERSION_PATCH;
}

const char *dlop_version_string(void) { return DLOP_VERSION_STRING; }

unsigned dlop_abi_version(void) { return DLOP_ABI_VERSION; }
