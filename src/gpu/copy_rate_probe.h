// This GPU's copy rates (gpu/copy_rates.h) measured as resumable steps that never wait:
// each step() queues the next try, or asks whether the last one finished and returns at
// once; the caller's progress loop bounds the whole with its idle clock and timeout, as
// every other wait. Times are the GPU's own (two timing events around each copy, read
// with cuEventElapsedTime), so no host scheduling (a yield, another process on the core)
// falls inside a timed interval. The tries, on a stream of their own, best of each kind:
// a 64-byte copy (the step's fixed cost), then copies out, then in; the first try of
// each kind warms up (first touch, driver paths) and is not counted, and sizes the rest
// down where it took more than their share of the set-up's budget.
// Measured once per process and device: the result is kept, keyed by the context's
// device, and a later probe there (another communicator's) is done at its first step,
// having queued nothing. A failure is kept only where the driver lacks entry points (it
// will not gain them); after another the next set-up tries again. Probes of one device
// that run at once each measure until one has the rates; the others take them between tries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/noncopyable.h"
#include "base/status.h"
#include "gpu/copy_rates.h"
#include "gpu/gpu_runtime.h"

namespace gpurdma::gpu {

class CopyRateProbe : private NonCopyable {
public:
    // bytes: the caller's unit; copies are timed at max(bytes, kRateBytes), and never
    // shrunk below bytes.
    CopyRateProbe(CUcontext ctx, size_t bytes);
    // A try still queued is waited for before its memory goes (only after an abandoned set-up).
    ~CopyRateProbe();

    // Ok with *done: rates() holds the rates. Ok without: call again later. An error
    // names the driver call that failed; Unsupported where the driver lacks entry points.
    Status step(bool *done);
    const CopyRates &rates() const { return rates_; }
    // Grows with each try that finished (the idle clock's).
    uint64_t position() const { return finished_tries_; }
    std::string describe_wait() const;

private:
    enum class Kind { Step, D2H, H2D, Done };
    struct Series {
        size_t bytes = 0;  // of the measured tries
        int tries = 0;  // so far, the warm-up included
        double best_us = 0;
        double spent_us = 0;  // the measured tries'
    };
    struct Resources;

    // The rates already known for this device (then done), or the resources to measure them.
    Status open();
    Status queue_try();
    // The finished try's time into its series, and on to the next kind once that is done.
    void record_try(double gpu_us);
    void start_kind(Kind kind);
    // A failure ends the probe (*done): step() says it again if called again.
    Status fail_or(const Status &st, bool *done);

    CUcontext ctx_;
    CUdevice device_ = -1;  // the cache's key; -1: unknown, not kept
    size_t min_bytes_, max_bytes_;
    std::unique_ptr<Resources> res_;
    Kind kind_ = Kind::Step;
    Series series_;
    bool in_flight_ = false;
    double queue_us_ = 0;  // the host's time to queue the try in flight
    double step_gpu_us_ = 1e300;  // the 64-byte copy's GPU time alone, taken off the copies'
    uint64_t finished_tries_ = 0;
    CopyRates rates_;
    Status failed_;
};

}  // namespace gpurdma::gpu
