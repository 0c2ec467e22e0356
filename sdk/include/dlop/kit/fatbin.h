/* dlop/kit/fatbin.h — naming a plugin's embedded CUDA fatbin from C: the image that
 * dlop_add_plugin (cmake/DlopPlugin.cmake) compiles from a .cu file and links into the plugin,
 * or NULL in a build without CUDA, so the same C source builds with and without nvcc. */
#ifndef DLOP_KIT_FATBIN_H
#define DLOP_KIT_FATBIN_H

/* The embedded symbol is <target>_<stem>_fatbin. Declare it with DLOP_FATBIN_DECLARE at file
 * scope and pass DLOP_FATBIN(symbol) to host->cuda_module_load (or an elementwise spec). It is
 * hidden, so the plugin still exports only its entry symbol. */
#if defined(DLOP_HAVE_CUDA_KERNELS) && DLOP_HAVE_CUDA_KERNELS
#define DLOP_FATBIN_DECLARE(symbol) \
  extern const unsigned char symbol[] __attribute__((visibility("hidden")))
#define DLOP_FATBIN(symbol) (symbol)
#else
#define DLOP_FATBIN_DECLARE(symbol) extern const unsigned char symbol[] /* never referenced */
#define DLOP_FATBIN(symbol) NULL
#endif

#endif
