/* dlop/version.h — SDK and ABI version numbers.
 * The ABI version is what plugins and hosts negotiate: same major, any minor. */
#ifndef DLOP_VERSION_H
#define DLOP_VERSION_H

#define DLOP_VERSION_MAJOR 0
#define DLOP_VERSION_MINOR 1
#define DLOP_VERSION_PATCH 0
#define DLOP_VERSION_STRING "0.1.0"

/* ABI major: bumped on any breaking change (a field moved, a signature changed).
 * ABI minor: bumped when a field or a table slot is appended. */
#define DLOP_ABI_MAJOR 1
#define DLOP_ABI_MINOR 2

/* One 32-bit number: major in the high 16 bits, minor in the low 16. */
#define DLOP_MAKE_ABI_VERSION(major, minor) ((((unsigned)(major)) << 16) | ((unsigned)(minor) & 0xffffu))
#define DLOP_ABI_VERSION DLOP_MAKE_ABI_VERSION(DLOP_ABI_MAJOR, DLOP_ABI_MINOR)
#define DLOP_ABI_VERSION_MAJOR_OF(v) (((unsigned)(v)) >> 16)
#define DLOP_ABI_VERSION_MINOR_OF(v) (((unsigned)(v)) & 0xffffu)

#endif
