/* device.c — naming devices ("cpu", "cuda:N") and asking whether one can be used now, with a
 * message naming what is missing when it cannot (no driver, no GPU, an ordinal out of range). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuda_driver.h"
#include "internal.h"

/* Parse the ordinal after "cuda:"; digits only, at most 4 of them. */
static int parse_ordinal(const char *digits, int32_t *ordinal) {
  size_t length = strlen(digits);
  if (length == 0 || length > 4) return 0;
  for (size_t i = 0; i < length; i++)
    if (!isdigit((unsigned char)digits[i])) return 0;
  *ordinal = (int32_t)atoi(digits);
  return 1;
}

int dlop_device_parse(const char *text, dlop_device *device) {
  if (device == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_device_parse: device is NULL");
  if (text == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT,
                       "dlop_device_parse: text is NULL (expected \"cpu\", \"cuda\" or \"cuda:N\")");
  if (strcasecmp(text, "cpu") == 0) {
    device->type = DLOP_DEVICE_CPU;
    device->id = 0;
    return DLOP_OK;
  }
  const char *rest = NULL;
  if (strncasecmp(text, "cuda", 4) == 0) rest = text + 4;
  else if (strncasecmp(text, "gpu", 3) == 0) rest = text + 3;
  int32_t ordinal = 0;
  if (rest != NULL && (*rest == '\0' || (*rest == ':' && parse_ordinal(rest + 1, &ordinal)))) {
    device->type = DLOP_DEVICE_CUDA;
    device->id = ordinal;
    return DLOP_OK;
  }
  return dlop__error(DLOP_INVALID_ARGUMENT,
                     "unknown device \"%s\": expected \"cpu\", \"cuda\", \"cuda:N\" or \"gpu:N\" "
                     "with N a device ordinal such as 0",
                     text);
}

const char *dlop_device_format(dlop_device device, char *buffer, size_t size) {
  if (buffer == NULL || size == 0) return "";
  if (device.type == DLOP_DEVICE_CPU) snprintf(buffer, size, "cpu");
  else if (device.type == DLOP_DEVICE_CUDA) snprintf(buffer, size, "cuda:%d", (int)device.id);
  else snprintf(buffer, size, "unknown-device(type=%d,id=%d)", (int)device.type, (int)device.id);
  return buffer;
}

int dlop_device_check(dlop_device device) {
  if (device.type == DLOP_DEVICE_CPU) {
    if (device.id != 0)
      return dlop__error(DLOP_NO_DEVICE, "CPU device id must be 0, got %d", (int)device.id);
    return DLOP_OK;
  }
  if (device.type != DLOP_DEVICE_CUDA)
    return dlop__error(DLOP_NO_DEVICE,
                       "device type %d is not supported (expected 1 = cpu or 2 = cuda)",
                       (int)device.type);
  /* Retaining the primary context (and making it current) proves the device is usable, not
   * just enumerated; the caller's current context is put back, as after every dlop call. */
  dlop__cuda_scope scope;
  int status = dlop__cuda_use_device(device.id, &scope);
  if (status != DLOP_OK) return status;
  return dlop__cuda_restore_context(&scope);
}

int dlop_cuda_device_count(int *count) {
  if (count == NULL)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_cuda_device_count: count is NULL");
  *count = dlop__cuda_device_count();
  return DLOP_OK;
}

static void cpu_model(char *buffer, size_t size) {
  snprintf(buffer, size, "CPU");
  FILE *file = fopen("/proc/cpuinfo", "r");
  if (file == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, file)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    char *value = strchr(line, ':');
    if (value == NULL) break;
    value++;
    while (*value == ' ' || *value == '\t') value++;
    value[strcspn(value, "\n")] = '\0';
    if (*value) snprintf(buffer, size, "%s", value);
    break;
  }
  fclose(file);
}

int dlop_device_description(dlop_device device, char *buffer, size_t size) {
  if (buffer == NULL || size == 0)
    return dlop__error(DLOP_INVALID_ARGUMENT, "dlop_device_description: empty buffer");
  buffer[0] = '\0';
  int status = dlop_device_check(device);
  if (status != DLOP_OK) return status;
  if (device.type == DLOP_DEVICE_CPU) {
    cpu_model(buffer, size);
    return DLOP_OK;
  }
  CUdevice handle;
  CUresult result = dlop__cuda.cuDeviceGet(&handle, device.id);
  if (result == DLOP_CUDA_SUCCESS)
    result = dlop__cuda.cuDeviceGetName(buffer, size > 0x7fffffff ? 0x7fffffff : (int)size, handle);
  if (result != DLOP_CUDA_SUCCESS) return dlop__cuda_fail(result, "cuDeviceGetName");
  return DLOP_OK;
}
