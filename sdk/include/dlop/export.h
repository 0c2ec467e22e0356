/* dlop/export.h — DLOP_API, the mark on every function libdlop exports. libdlop is compiled
 * with hidden visibility and DLOP_BUILDING_LIBRARY, so what carries DLOP_API is its whole
 * dynamic interface; for programs using libdlop, and for plugins, DLOP_API is empty. */
#ifndef DLOP_EXPORT_H
#define DLOP_EXPORT_H

#if defined(DLOP_BUILDING_LIBRARY)
#define DLOP_API __attribute__((visibility("default")))
#else
#define DLOP_API
#endif

#endif
