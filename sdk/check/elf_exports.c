/* elf_exports.c — reads a plugin file's dynamic symbol table (.dynsym) with <elf.h>, to check
 * that dlop_plugin_init is the only symbol it exports: other exported names can clash with the
 * host's or another plugin's and make the plugin's behaviour depend on load order. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_suite.h"

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  unsigned char *data = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long length = ftell(f);
    if (length > 0 && fseek(f, 0, SEEK_SET) == 0) {
      data = malloc((size_t)length);
      if (data && fread(data, 1, (size_t)length, f) != (size_t)length) {
        free(data);
        data = NULL;
      }
      *size = (size_t)length;
    }
  }
  fclose(f);
  return data;
}

int check_elf_extra_exports(const char *path, const char *const *allowed, char *list,
                            size_t size) {
  size_t length = 0, used = 0;
  unsigned char *data = read_file(path, &length);
  list[0] = '\0';
  if (data == NULL) {
    snprintf(list, size, "cannot read %s", path);
    return -1;
  }
  const Elf64_Ehdr *header = (const Elf64_Ehdr *)data;
  if (length < sizeof *header || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_ident[EI_CLASS] != ELFCLASS64 || header->e_shoff == 0 ||
      header->e_shoff + (size_t)header->e_shnum * sizeof(Elf64_Shdr) > length) {
    snprintf(list, size, "%s is not a 64-bit ELF file with section headers", path);
    free(data);
    return -1;
  }
  const Elf64_Shdr *sections = (const Elf64_Shdr *)(data + header->e_shoff);
  int count = 0, found = 0;
  for (int s = 0; s < header->e_shnum; s++) {
    if (sections[s].sh_type != SHT_DYNSYM) continue;
    const Elf64_Shdr *symtab = &sections[s];
    if (symtab->sh_link >= header->e_shnum) break;
    const Elf64_Shdr *strtab = &sections[symtab->sh_link];
    if (symtab->sh_offset + symtab->sh_size > length || strtab->sh_offset + strtab->sh_size > length)
      break;
    found = 1;
    const Elf64_Sym *symbols = (const Elf64_Sym *)(data + symtab->sh_offset);
    size_t n = symtab->sh_size / sizeof(Elf64_Sym);
    for (size_t i = 1; i < n; i++) {
      const Elf64_Sym *sym = &symbols[i];
      int bind = ELF64_ST_BIND(sym->st_info), type = ELF64_ST_TYPE(sym->st_info);
      int visibility = ELF64_ST_VISIBILITY(sym->st_other);
      if (sym->st_shndx == SHN_UNDEF) continue; /* imported, not exported */
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      if (visibility == STV_HIDDEN || visibility == STV_INTERNAL) continue;
      /* Linker-made NOTYPE markers (_edata, _end, __bss_start) are not the plugin's names;
       * our plugins have none, but older linkers add them. */
      if (type != STT_FUNC && type != STT_OBJECT && type != STT_TLS && type != STT_GNU_IFUNC &&
          type != STT_COMMON)
        continue;
      if (sym->st_name >= strtab->sh_size) continue;
      const char *name = (const char *)(data + strtab->sh_offset + sym->st_name);
      int is_allowed = 0;
      for (const char *const *a = allowed; *a != NULL && !is_allowed; a++)
        is_allowed = strcmp(name, *a) == 0;
      if (is_allowed) continue;
      count++;
      if (used < size)
        used += (size_t)snprintf(list + used, size - used, "%s%s", count > 1 ? ", " : "", name);
    }
  }
  free(data);
  if (!found) {
    snprintf(list, size, "%s has no dynamic symbol table (.dynsym)", path);
    return -1;
  }
  return count;
}
