// How each GPU vendor's runtime library fills the one entry table (gpu_runtime.h):
// libcuda's driver API directly (cuda_api.cpp), libamdhip64 through adapters that give
// its calls the driver API's meaning (hip_api.cpp). Each loader opens its library at run
// time, checks that a device is there, and on failure closes it and says why.
#pragma once

#include <string>

#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

// On success `*lib` holds the dlopen handle (closed by the caller at exit, never).
// already_loaded: only a library the process has loaded already (RTLD_NOLOAD): the other
// vendor's, whose buffers the application may pass (gpu_runtime.h, other_vendor()).
bool load_cuda_api(DriverApi *api, void **lib, std::string *why, bool already_loaded = false);
bool load_hip_api(DriverApi *api, void **lib, std::string *why, bool already_loaded = false);

}  // namespace gpurdma::gpu
