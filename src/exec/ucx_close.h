// The process's UCX at its end (MPI_Finalize), under the one wait loop: every
// endpoint's close completes (bounded by kCloseBound), then the worker goes idle
// (bounded by kQuietBound: what the closes queued is done), then the context goes.
// A bound passing fails nothing: it is logged at verbose 1 and the context goes anyway
// (a close still running is abandoned).
#pragma once

#include <memory>

#include "base/log.h"
#include "transport/ucx_context.h"

namespace gpurdma::exec {

constexpr double kCloseBound = 2.0;  // seconds without a close completing
constexpr double kQuietBound = 0.2;  // seconds for the worker to go idle

// Closes and releases ucx (null: nothing to do); spin_us as in WaitPolicy.
void close_ucx(std::unique_ptr<transport::UcxContext> ucx, double spin_us, const Logger *log);

}  // namespace gpurdma::exec
