/* elf_check.h — validating a plugin file as an ELF shared object for this machine before it is
 * handed to dlopen, so that a truncated, corrupt or foreign file is refused with a reason instead
 * of crashing the dynamic loader (SIGBUS, SIGSEGV) inside the host process. */
#ifndef DLOP_LOADER_ELF_CHECK_H
#define DLOP_LOADER_ELF_CHECK_H

#include <stddef.h>

/* 0 when the file at path is an ELF shared object of this process's class, byte order and
 * machine whose program headers, loadable segments and dynamic section all lie inside the file
 * and whose dynamic table points inside its loaded segments; otherwise -1 with the reason
 * (no path prefix) in error. Reads the file; never maps or runs it. */
int dlop__elf_check(const char *path, char *error, size_t error_size);

#endif
