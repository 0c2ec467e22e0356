/* nvrtc_recall.h — what NVRTC this process would load (its version and the architectures it
 * compiles for), remembered on disk beside the compile cache, so that a compile-cache hit in a
 * fresh process does not dlopen libnvrtc (a 110 MB library: 6-8 ms, most of a hit's time). */
#ifndef DLOP_NVRTC_RECALL_H
#define DLOP_NVRTC_RECALL_H

/* The libraries dlop looks for when DLOP_NVRTC_LIBRARY is not set, newest first. */
#define DLOP__NVRTC_SONAMES 2
extern const char *const dlop__nvrtc_sonames[DLOP__NVRTC_SONAMES];

/* What the compile cache's keys and the choice of target read of the compiler. */
typedef struct dlop__nvrtc_facts {
  char identity[64]; /* "NVRTC 13.0" */
  int *archs;        /* ascending, malloc'ed */
  int num_archs;
} dlop__nvrtc_facts;

/* The facts of the library the loader would pick now, from the record written by an earlier
 * process: 1 when there is one and the file it names is still the same file (device, inode,
 * size, modification time), else 0 (load the library). */
int dlop__nvrtc_recall(dlop__nvrtc_facts *facts);

/* Record the facts of the loaded library; symbol is an address inside it (dladdr names its
 * file). Written atomically (a temporary file renamed into place); failures are ignored (the
 * next process loads the library again). */
void dlop__nvrtc_remember(const void *symbol, const dlop__nvrtc_facts *facts);

#endif
