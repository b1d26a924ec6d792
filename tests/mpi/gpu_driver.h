/*
 * gpu_driver.h: the GPU runtime for the MPI test programs that pass GPU buffers, loaded
 * at run time, never linked: CUDA's driver (libcuda.so.1), else HIP's runtime
 * (libamdhip64), as the component picks them. On a machine without a GPU the stand-ins
 * (tests/gpu/fake_cuda.cpp, tests/gpu/fake_hip.cpp) are found through LD_LIBRARY_PATH.
 * The calls used have the same ABI in both (device pointers are 64-bit addresses).
 * Include it after check_common.h (PROGRAM, g_world_rank). Everything here is static.
 */
#ifndef GPURDMA_TESTS_GPU_DRIVER_H
#define GPURDMA_TESTS_GPU_DRIVER_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

typedef unsigned long long devptr;

/* The driver API entry points used here (the _v2 names are the ones cuda.h maps to). */
typedef struct cuda_api {
    void *lib;
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*primary_ctx_retain)(void **, int);
    int (*primary_ctx_release)(int);
    int (*ctx_set_current)(void *);
    int (*mem_alloc)(devptr *, size_t);
    int (*mem_free)(devptr);
    int (*htod)(devptr, const void *, size_t);
    int (*dtoh)(void *, devptr, size_t);
    int device;
    void *ctx;
    bool hip; /* HIP's runtime: a current device per thread, no contexts to retain */
} cuda_api;

static cuda_api cu;

static int hip_no_context(int device)
{
    (void)device;
    return 0;
}

/* HIP's runtime where there is no CUDA driver: the chosen device made current. */
static bool hip_open(bool device_per_rank, int local_rank, char *why, size_t why_size)
{
    const char *names[] = { "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so" };
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !cu.lib; i++)
        cu.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(why, why_size, "no HIP runtime (dlopen libamdhip64.so)");
        return false;
    }
    int (*count)(int *) = NULL, (*set_device)(int) = NULL;
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        { "hipInit", (void **)&cu.init },
        { "hipGetDeviceCount", (void **)&count },
        { "hipSetDevice", (void **)&set_device },
        { "hipMalloc", (void **)&cu.mem_alloc },
        { "hipFree", (void **)&cu.mem_free },
        { "hipMemcpyHtoD", (void **)&cu.htod },
        { "hipMemcpyDtoH", (void **)&cu.dtoh },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(cu.lib, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(why, why_size, "libamdhip64 has no %s", syms[i].name);
            return false;
        }
    }
    int n = 0, rc = cu.init(0);
    if (rc != 0 || (rc = count(&n)) != 0 || n == 0) {
        snprintf(why, why_size, "no AMD GPU (hipInit/hipGetDeviceCount: %d, %d devices)", rc, n);
        return false;
    }
    cu.device = device_per_rank ? local_rank % n : 0;
    if ((rc = set_device(cu.device)) != 0) {
        snprintf(why, why_size, "device %d: hipSetDevice failed (%d)", cu.device, rc);
        return false;
    }
    cu.primary_ctx_release = hip_no_context;
    cu.hip = true;
    return true;
}

/* CUDA's driver: the chosen device's primary context made current. */
static bool cuda_driver_open(bool device_per_rank, int local_rank, char *why, size_t why_size)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(why, why_size, "no CUDA driver (dlopen libcuda.so.1: %s)", dlerror());
        return false;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        { "cuInit", (void **)&cu.init },
        { "cuDeviceGet", (void **)&cu.device_get },
        { "cuDevicePrimaryCtxRetain", (void **)&cu.primary_ctx_retain },
        { "cuDevicePrimaryCtxRelease_v2", (void **)&cu.primary_ctx_release },
        { "cuCtxSetCurrent", (void **)&cu.ctx_set_current },
        { "cuMemAlloc_v2", (void **)&cu.mem_alloc },
        { "cuMemFree_v2", (void **)&cu.mem_free },
        { "cuMemcpyHtoD_v2", (void **)&cu.htod },
        { "cuMemcpyDtoH_v2", (void **)&cu.dtoh },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(cu.lib, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(why, why_size, "libcuda.so.1 has no %s", syms[i].name);
            return false;
        }
    }
    int rc = cu.init(0);
    if (rc != 0) {
        snprintf(why, why_size, "cuInit failed (%d)", rc);
        return false;
    }
    /* Devices are counted by asking for them in turn (cuDeviceGet fails past the last). */
    int count = 0, dev;
    while (count < 64 && cu.device_get(&dev, count) == 0)
        count++;
    if (count == 0) {
        snprintf(why, why_size, "no CUDA device (cuDeviceGet(0) failed)");
        return false;
    }
    const int ordinal = device_per_rank ? local_rank % count : 0;
    if ((rc = cu.device_get(&cu.device, ordinal)) != 0 || (rc = cu.primary_ctx_retain(&cu.ctx, cu.device)) != 0) {
        snprintf(why, why_size, "device %d: cannot retain its primary context (%d)", ordinal, rc);
        return false;
    }
    if ((rc = cu.ctx_set_current(cu.ctx)) != 0) {
        cu.primary_ctx_release(cu.device);
        cu.ctx = NULL;
        snprintf(why, why_size, "device %d: cuCtxSetCurrent failed (%d)", ordinal, rc);
        return false;
    }
    return true;
}

/* CUDA first, then HIP (the component's order); on failure why[] says what is missing
 * from both. */
static bool gpu_open(bool device_per_rank, int local_rank, char *why, size_t why_size)
{
    char why_cuda[160];
    if (cuda_driver_open(device_per_rank, local_rank, why_cuda, sizeof why_cuda)) return true;
    cu = (cuda_api){ 0 };
    char why_hip[160];
    if (hip_open(device_per_rank, local_rank, why_hip, sizeof why_hip)) return true;
    snprintf(why, why_size, "%.120s; %.120s", why_cuda, why_hip);
    return false;
}

/* A failed copy or allocation ends the job: no verdict can follow it. */
static void gpu_must(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, PROGRAM ": [world rank %d] %s failed (CUresult %d)\n", g_world_rank, what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

#endif
