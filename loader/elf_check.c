/* elf_check.c — the ELF checks run on a plugin file before dlopen (elf_check.h): the header
 * (magic, class, byte order, type, machine, header sizes), every program header, each loadable
 * segment inside the file, the dynamic section inside a loaded segment, the addresses and
 * string offsets of its entries inside what will be mapped, and every relocation's target
 * inside a loaded segment. What dlopen would read out of range
 * of the file (and fault on: SIGBUS past the end of a mapping) is refused here. */
#include "elf_check.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if UINTPTR_MAX == UINT64_MAX
#define ELF_CLASS ELFCLASS64
typedef Elf64_Ehdr elf_header;
typedef Elf64_Phdr elf_program_header;
typedef Elf64_Dyn elf_dynamic;
typedef Elf64_Rela ElfW_Rela;
typedef Elf64_Rel ElfW_Rel;
#else
#define ELF_CLASS ELFCLASS32
typedef Elf32_Ehdr elf_header;
typedef Elf32_Phdr elf_program_header;
typedef Elf32_Dyn elf_dynamic;
typedef Elf32_Rela ElfW_Rela;
typedef Elf32_Rel ElfW_Rel;
#endif

#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
#elif defined(__i386__)
#define ELF_MACHINE EM_386
#elif defined(__powerpc64__)
#define ELF_MACHINE EM_PPC64
#else
#error "elf_check.c: add this machine's ELF e_machine value"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ELF_DATA ELFDATA2LSB
#else
#define ELF_DATA ELFDATA2MSB
#endif

/* Program headers a plugin may have; more is not a plugin a compiler made. */
#define ELF_MAX_PROGRAM_HEADERS 64
/* Dynamic entries read at most (a plugin has a few dozen). */
#define ELF_MAX_DYNAMIC_ENTRIES 4096

static int fail(char *error, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *error, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  if (error != NULL && size > 0) vsnprintf(error, size, format, args);
  va_end(args);
  return -1;
}

/* Read exactly size bytes at offset; 0, or -1 when the file is shorter or unreadable. */
static int read_at(int fd, uint64_t offset, void *buffer, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t got = pread(fd, (char *)buffer + done, size - done, (off_t)(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

/* [offset, offset + length) inside [0, limit), without overflow. */
static int inside(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

static int check_header(const elf_header *h, uint64_t file_size, char *error, size_t size) {
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
    return fail(error, size, "not an ELF file (no \\177ELF magic): a plugin is a shared object");
  if (h->e_ident[EI_CLASS] != ELF_CLASS)
    return fail(error, size, "ELF class %d, but this process is %d-bit", h->e_ident[EI_CLASS],
                ELF_CLASS == ELFCLASS64 ? 64 : 32);
  if (h->e_ident[EI_DATA] != ELF_DATA)
    return fail(error, size, "ELF byte order %d does not match this machine's", h->e_ident[EI_DATA]);
  if (h->e_ident[EI_VERSION] != EV_CURRENT || h->e_version != EV_CURRENT)
    return fail(error, size, "unknown ELF version %u", (unsigned)h->e_version);
  if (h->e_type != ET_DYN)
    return fail(error, size, "ELF type %u is not a shared object (ET_DYN)", (unsigned)h->e_type);
  if (h->e_machine != ELF_MACHINE)
    return fail(error, size, "built for ELF machine %u, this machine is %u",
                (unsigned)h->e_machine, (unsigned)ELF_MACHINE);
  if (h->e_ehsize != sizeof *h || h->e_phentsize != sizeof(elf_program_header))
    return fail(error, size, "ELF header or program-header size (%u, %u) is not this class's",
                (unsigned)h->e_ehsize, (unsigned)h->e_phentsize);
  if (h->e_phnum == 0 || h->e_phnum > ELF_MAX_PROGRAM_HEADERS)
    return fail(error, size, "%u program headers (expected 1 to %d)", (unsigned)h->e_phnum,
                ELF_MAX_PROGRAM_HEADERS);
  if (!inside(h->e_phoff, (uint64_t)h->e_phnum * sizeof(elf_program_header), file_size))
    return fail(error, size, "the program headers (offset %llu) lie past the end of the file "
                "(%llu bytes): truncated?", (unsigned long long)h->e_phoff,
                (unsigned long long)file_size);
  if (h->e_shnum != 0 && !inside(h->e_shoff, (uint64_t)h->e_shnum * h->e_shentsize, file_size))
    return fail(error, size, "the section headers (offset %llu) lie past the end of the file "
                "(%llu bytes): truncated?", (unsigned long long)h->e_shoff,
                (unsigned long long)file_size);
  return 0;
}

/* The loaded segment holding [address, address + length), or NULL. */
static const elf_program_header *segment_of(const elf_program_header *ph, int count,
                                            uint64_t address, uint64_t length) {
  for (int i = 0; i < count; i++)
    if (ph[i].p_type == PT_LOAD && address >= ph[i].p_vaddr &&
        inside(address - ph[i].p_vaddr, length, ph[i].p_memsz))
      return &ph[i];
  return NULL;
}

static int check_segments(const elf_program_header *ph, int count, uint64_t file_size,
                          char *error, size_t size) {
  int loads = 0;
  for (int i = 0; i < count; i++) {
    const elf_program_header *p = &ph[i];
    if (p->p_type != PT_LOAD && p->p_type != PT_DYNAMIC && p->p_type != PT_INTERP &&
        p->p_type != PT_NOTE && p->p_type != PT_TLS && p->p_type != PT_GNU_RELRO)
      continue; /* headers dlopen does not read from the file (GNU_STACK, GNU_EH_FRAME, ...) */
    if (!inside(p->p_offset, p->p_filesz, file_size))
      return fail(error, size, "segment %d (type %u) spans bytes %llu..%llu, past the end of the "
                  "file (%llu bytes): truncated?", i, (unsigned)p->p_type,
                  (unsigned long long)p->p_offset,
                  (unsigned long long)(p->p_offset + p->p_filesz), (unsigned long long)file_size);
    if (p->p_type != PT_LOAD) continue;
    loads++;
    if (p->p_filesz > p->p_memsz)
      return fail(error, size, "loadable segment %d holds more file bytes than memory", i);
    if (p->p_align > 1 && ((p->p_align & (p->p_align - 1)) != 0 ||
                           p->p_offset % p->p_align != p->p_vaddr % p->p_align))
      return fail(error, size, "loadable segment %d has an invalid alignment %llu", i,
                  (unsigned long long)p->p_align);
    if (p->p_vaddr + p->p_memsz < p->p_vaddr)
      return fail(error, size, "loadable segment %d wraps around the address space", i);
  }
  if (loads == 0) return fail(error, size, "no loadable segment");
  return 0;
}

/* Every relocation of the table at address (size bytes, RELA or REL entries) writes inside a
 * loaded segment: the dynamic loader applies them all before any plugin code runs, and a
 * corrupt r_offset is a write to a wild address in the host. */
static int check_relocations(int fd, const elf_program_header *ph, int count, uint64_t address,
                             uint64_t bytes, int rela, const char *what, char *error,
                             size_t size) {
  if (bytes == 0) return 0;
  const elf_program_header *segment = segment_of(ph, count, address, bytes);
  if (segment == NULL || !inside(address - segment->p_vaddr, bytes, segment->p_filesz))
    return fail(error, size, "the %s relocations (0x%llx, %llu bytes) lie outside the file's "
                "loaded bytes", what, (unsigned long long)address, (unsigned long long)bytes);
  const size_t entry = rela ? sizeof(ElfW_Rela) : sizeof(ElfW_Rel);
  uint64_t offset = segment->p_offset + (address - segment->p_vaddr);
  for (uint64_t done = 0; done + entry <= bytes; done += entry) {
    ElfW_Rela r = {0};
    if (read_at(fd, offset + done, &r, entry) != 0)
      return fail(error, size, "cannot read the %s relocations", what);
    if (segment_of(ph, count, (uint64_t)r.r_offset, sizeof(uintptr_t)) == NULL)
      return fail(error, size, "%s relocation %llu writes at 0x%llx, outside the loaded segments",
                  what, (unsigned long long)(done / entry), (unsigned long long)r.r_offset);
  }
  return 0;
}

/* The dynamic table: present, inside the file and a loaded segment, and every address or
 * string offset dlopen follows is inside what is mapped. */
static int check_dynamic(int fd, const elf_program_header *ph, int count, char *error,
                         size_t size) {
  const elf_program_header *dynamic = NULL;
  for (int i = 0; i < count; i++)
    if (ph[i].p_type == PT_DYNAMIC) dynamic = &ph[i];
  if (dynamic == NULL) return fail(error, size, "no dynamic section: not a shared library");
  if (segment_of(ph, count, dynamic->p_vaddr, dynamic->p_filesz) == NULL)
    return fail(error, size, "the dynamic section lies outside the loaded segments");
  size_t entries = dynamic->p_filesz / sizeof(elf_dynamic);
  if (entries == 0 || entries > ELF_MAX_DYNAMIC_ENTRIES)
    return fail(error, size, "the dynamic section has %zu entries", entries);
  elf_dynamic *table = malloc(entries * sizeof *table);
  if (table == NULL) return fail(error, size, "out of memory reading the dynamic section");
  if (read_at(fd, dynamic->p_offset, table, entries * sizeof *table) != 0) {
    free(table);
    return fail(error, size, "cannot read the dynamic section");
  }
  uint64_t strtab = 0, strsz = 0, rela = 0, relasz = 0, rel = 0, relsz = 0, jmprel = 0;
  uint64_t pltrelsz = 0, pltrel = DT_RELA;
  int has_strtab = 0, terminated = 0, status = 0;
  for (size_t i = 0; i < entries && status == 0; i++) {
    uint64_t value = (uint64_t)table[i].d_un.d_val;
    switch (table[i].d_tag) {
      case DT_NULL: terminated = 1; entries = i; break;
      case DT_STRTAB: strtab = value; has_strtab = 1; break;
      case DT_STRSZ: strsz = value; break;
      case DT_RELASZ: relasz = value; break;
      case DT_RELSZ: relsz = value; break;
      case DT_PLTRELSZ: pltrelsz = value; break;
      case DT_PLTREL: pltrel = value; break;
      /* Addresses the loader dereferences at load time. */
      case DT_SYMTAB: case DT_HASH: case DT_GNU_HASH: case DT_RELA: case DT_REL:
      case DT_JMPREL: case DT_INIT_ARRAY: case DT_FINI_ARRAY: case DT_PREINIT_ARRAY:
      case DT_INIT: case DT_FINI: case DT_VERSYM: case DT_VERNEED: case DT_VERDEF:
      case DT_PLTGOT:
        if (table[i].d_tag == DT_RELA) rela = value;
        if (table[i].d_tag == DT_REL) rel = value;
        if (table[i].d_tag == DT_JMPREL) jmprel = value;
        if (segment_of(ph, count, value, 1) == NULL)
          status = fail(error, size, "dynamic entry %zu (tag %lld) points at address 0x%llx, "
                        "outside the loaded segments", i, (long long)table[i].d_tag,
                        (unsigned long long)value);
        break;
      default: break;
    }
  }
  if (status == 0 && !terminated)
    status = fail(error, size, "the dynamic section is not terminated (no DT_NULL)");
  if (status == 0 && (!has_strtab || segment_of(ph, count, strtab, strsz) == NULL))
    status = fail(error, size, "the dynamic string table (0x%llx, %llu bytes) lies outside the "
                  "loaded segments", (unsigned long long)strtab, (unsigned long long)strsz);
  for (size_t i = 0; i < entries && status == 0; i++) {
    int64_t tag = (int64_t)table[i].d_tag;
    if ((tag == DT_NEEDED || tag == DT_SONAME || tag == DT_RPATH || tag == DT_RUNPATH) &&
        (uint64_t)table[i].d_un.d_val >= strsz)
      status = fail(error, size, "dynamic entry %zu names string %llu of a %llu-byte table", i,
                    (unsigned long long)table[i].d_un.d_val, (unsigned long long)strsz);
  }
  free(table);
  if (status == 0)
    status = check_relocations(fd, ph, count, rela, rela ? relasz : 0, 1, "RELA", error, size);
  if (status == 0)
    status = check_relocations(fd, ph, count, rel, rel ? relsz : 0, 0, "REL", error, size);
  if (status == 0)
    status = check_relocations(fd, ph, count, jmprel, jmprel ? pltrelsz : 0, pltrel == DT_RELA,
                               "PLT", error, size);
  return status;
}

int dlop__elf_check(const char *path, char *error, size_t error_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(error, error_size, "cannot open: %s", strerror(errno));
  struct stat info;
  int status = -1;
  elf_header header;
  elf_program_header headers[ELF_MAX_PROGRAM_HEADERS];
  if (fstat(fd, &info) != 0) {
    fail(error, error_size, "cannot stat: %s", strerror(errno));
  } else if (read_at(fd, 0, &header, sizeof header) != 0) {
    fail(error, error_size, "%lld bytes: too short for an ELF header, not a shared object",
         (long long)info.st_size);
  } else if (check_header(&header, (uint64_t)info.st_size, error, error_size) != 0) {
    /* the reason is in error */
  } else if (read_at(fd, header.e_phoff, headers, header.e_phnum * sizeof headers[0]) != 0) {
    fail(error, error_size, "cannot read the program headers");
  } else if (check_segments(headers, header.e_phnum, (uint64_t)info.st_size, error,
                            error_size) == 0 &&
             check_dynamic(fd, headers, header.e_phnum, error, error_size) == 0) {
    status = 0;
  }
  close(fd);
  return status;
}
