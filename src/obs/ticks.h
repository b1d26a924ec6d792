// The recorder's clock: the CPU's time-stamp counter where it is invariant (x86's
// constant_tsc), a few cycles per read, so that stamping every call costs next to
// nothing on the latency path; the steady clock elsewhere. Ticks become seconds only
// when a dump is written, from two (ticks, clock) pairs far apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>

namespace gpurdma::obs {

inline uint64_t ticks()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// Converts ticks to Unix time: anchored at the process's start and re-measured at each
// dump (the longer apart, the closer the rate).
class TickClock {
public:
    TickClock() : ticks0_(ticks()), unix0_(unix_now()) {}
    // Seconds since the Unix epoch of tick t, using the rate measured now.
    double unix_seconds(uint64_t t) const
    {
        const uint64_t t1 = ticks();
        const double u1 = unix_now();
        return u1 - static_cast<double>(static_cast<int64_t>(t1 - t)) * seconds_per_tick();
    }
    // Seconds from `epoch` (Unix time) to tick t, computed from differences so that
    // microseconds survive in a double (Unix time itself keeps only about 0.25 us).
    // per_tick: seconds_per_tick() read once for all the ticks converted together.
    double seconds_since(double epoch, uint64_t t, double per_tick) const
    {
        return (unix0_ - epoch) + static_cast<double>(static_cast<int64_t>(t - ticks0_)) * per_tick;
    }
    // The rate as measured now (since the anchor).
    double seconds_per_tick() const
    {
        const uint64_t t1 = ticks();
        const double u1 = unix_now();
        return t1 > ticks0_ && u1 > unix0_ ? (u1 - unix0_) / static_cast<double>(t1 - ticks0_) : 1e-9;
    }
    // The process's clock (anchored by its first use).
    static const TickClock &process();
    static double unix_now()
    {
        timespec ts{};
        clock_gettime(CLOCK_REALTIME, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }

private:
    uint64_t ticks0_;
    double unix0_;
};

}  // namespace gpurdma::obs
