// The call counters (gpurdma_comm_stats_t) as several threads see them: counted by the
// thread that holds a communicator's engine (or, for the process totals, by any), read
// by any thread (the shim, MPI_T). Every field is a uint64_t stored and loaded whole,
// with relaxed order: a snapshot is each field's value at some moment, not all at one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpurdma/gpurdma.h"

namespace gpurdma::counters {

static_assert(sizeof(gpurdma_comm_stats_t) % sizeof(uint64_t) == 0, "counters are uint64_t");

// Adds n where only one thread at a time counts (a communicator's engine holder).
inline void add_alone(gpurdma_comm_stats_t &stats, uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    __atomic_store_n(&(stats.*field), stats.*field + n, __ATOMIC_RELAXED);
}

// Adds n where several threads may count at once (the process totals).
inline void add_shared(gpurdma_comm_stats_t &stats, uint64_t gpurdma_comm_stats_t::*field, uint64_t n)
{
    __atomic_fetch_add(&(stats.*field), n, __ATOMIC_RELAXED);
}

// A snapshot, field by field, from any thread.
inline gpurdma_comm_stats_t snapshot(const gpurdma_comm_stats_t &stats)
{
    gpurdma_comm_stats_t out{};
    const auto *from = reinterpret_cast<const uint64_t *>(&stats);
    auto *to = reinterpret_cast<uint64_t *>(&out);
    for (size_t i = 0; i < sizeof out / sizeof(uint64_t); ++i) to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    return out;
}

}  // namespace gpurdma::counters
