/* cl_cache.c - the OpenCL program binary cache (cl_cache.h). */
#include "cl_cache.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "ember/ember_errors.h"

#define CACHE_MAGIC "EMBCLBN1"
#define CACHE_SUM_BYTES crypto_generichash_BYTES
#define CACHE_KEY_BYTES 16       /* 128 bits of each name half */
#define CACHE_MAX_BYTES (256u << 20)

static void device_string(cl_device_id dev, cl_device_info what, char *buf,
                          size_t len) {
  buf[0] = '\0';
  if (clGetDeviceInfo(dev, what, len - 1, buf, NULL) != CL_SUCCESS)
    buf[0] = '\0';
  buf[len - 1] = '\0';
}

/* Hash the NUL-terminated strings, each with its NUL, into hex. */
static void hash_hex(char hex[2 * CACHE_KEY_BYTES + 1],
                     const char *const *parts, size_t n) {
  crypto_generichash_state st;
  unsigned char key[CACHE_KEY_BYTES];
  crypto_generichash_init(&st, NULL, 0, sizeof key);
  for (size_t i = 0; i < n; i++)
    crypto_generichash_update(&st, (const unsigned char *)parts[i],
                              strlen(parts[i]) + 1);
  crypto_generichash_final(&st, key, sizeof key);
  sodium_bin2hex(hex, 2 * CACHE_KEY_BYTES + 1, key, sizeof key);
}

void acc_cl_cache_name(char *path, size_t len, const char *dir,
                       const char *tag, cl_device_id dev, const char *source,
                       const char *options) {
  path[0] = '\0';
  if (sodium_init() < 0) return; /* no hashing: no cache */
  char name[512], driver[256], version[256];
  device_string(dev, CL_DEVICE_NAME, name, sizeof name);
  device_string(dev, CL_DRIVER_VERSION, driver, sizeof driver);
  device_string(dev, CL_DEVICE_VERSION, version, sizeof version);
  const char *device[] = {name, driver, version};
  const char *program[] = {source, options};
  char key[2 * CACHE_KEY_BYTES + 1], src[2 * CACHE_KEY_BYTES + 1];
  hash_hex(key, device, 3);
  hash_hex(src, program, 2);
  int n = snprintf(path, len, "%s/ember-%s-%s-%s.clbin", dir, tag, key, src);
  if (n < 0 || (size_t)n >= len) path[0] = '\0';
}

/* The payload of a sound cache file (malloc'd), or NULL. */
static unsigned char *cache_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char hdr[16 + CACHE_SUM_BYTES], sum[CACHE_SUM_BYTES];
  unsigned char *data = NULL;
  uint64_t len;
  if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr ||
      memcmp(hdr, CACHE_MAGIC, 8) != 0)
    goto fail;
  memcpy(&len, hdr + 8, 8);
  if (len == 0 || len > CACHE_MAX_BYTES) goto fail;
  data = malloc((size_t)len);
  if (!data || fread(data, 1, (size_t)len, f) != len || fgetc(f) != EOF)
    goto fail;
  crypto_generichash(sum, sizeof sum, data, (unsigned long long)len, NULL, 0);
  if (sodium_memcmp(sum, hdr + 16, sizeof sum) != 0) goto fail;
  fclose(f);
  *size = (size_t)len;
  return data;
fail:
  free(data);
  fclose(f);
  return NULL;
}

cl_program acc_cl_cache_load(cl_context ctx, cl_device_id dev,
                             const char *path, const char *options) {
  size_t size;
  unsigned char *bin = cache_read(path, &size);
  if (!bin) return NULL;
  const unsigned char *bins[1] = {bin};
  cl_int status = CL_SUCCESS, rc;
  cl_program prog =
      clCreateProgramWithBinary(ctx, 1, &dev, &size, bins, &status, &rc);
  free(bin);
  if (rc == CL_SUCCESS && status == CL_SUCCESS &&
      clBuildProgram(prog, 1, &dev, options, NULL, NULL) == CL_SUCCESS)
    return prog;
  if (prog) clReleaseProgram(prog);
  return NULL;
}

void acc_cl_cache_store(cl_program prog, const char *path) {
  size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size,
                       NULL) != CL_SUCCESS ||
      size == 0 || size > CACHE_MAX_BYTES)
    return;
  unsigned char *bin = malloc(size);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  char tmp[1100];
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) !=
      CL_SUCCESS)
    goto out;
  snprintf(tmp, sizeof tmp, "%s.%ld.%p.tmp", path, (long)getpid(),
           (const void *)prog);
  FILE *f = fopen(tmp, "wb");
  if (!f) goto out;
  uint64_t len = size;
  unsigned char sum[CACHE_SUM_BYTES];
  crypto_generichash(sum, sizeof sum, bin, size, NULL, 0);
  bool ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&len, 8, 1, f) == 1 &&
            fwrite(sum, 1, sizeof sum, f) == sizeof sum &&
            fwrite(bin, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) remove(tmp);
out:
  free(bin);
}

int acc_cl_build_failed(cl_program prog, cl_device_id dev, cl_int rc,
                        const char *what, char *err, size_t err_len) {
  /* the log is returned whole or not at all: size it first */
  size_t len = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len) ==
          CL_SUCCESS &&
      len > 0 && (log = malloc(len + 1)) != NULL &&
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, len, log, NULL) ==
          CL_SUCCESS)
    log[len] = '\0';
  else if (log)
    log[0] = '\0';
  if (err && err_len)
    snprintf(err, err_len, "%s: clBuildProgram failed (%d): %s", what,
             (int)rc, log ? log : "");
  free(log);
  return EMBER_EPLATFORM;
}
