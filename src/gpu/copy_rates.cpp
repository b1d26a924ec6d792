#include "gpu/copy_rates.h"

#include <algorithm>

namespace gpurdma::gpu {

namespace {

// A copy faster than this is the stand-in's or a measurement too short to trust.
constexpr double kMaxGbps = 1000.0;

}  // namespace

double copy_gbps(size_t bytes, double copy_us, double step_us)
{
    const double us = std::max(copy_us - step_us, copy_us / 2);  // the fixed cost is not bandwidth
    const double rate = us > 0 ? static_cast<double>(bytes) / (us * 1e3) : kMaxGbps;
    return std::min(rate, kMaxGbps);
}

}  // namespace gpurdma::gpu
