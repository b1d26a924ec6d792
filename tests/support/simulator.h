// In-process execution of every rank's schedule on in-memory buffers, one thread,
// with the same slot/credit rules as the real channels. Test support only (not in the
// component's library): unit tests check schedules for shapes far larger than the
// machine with it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "exec/local_work.h"
#include "gpurdma/gpurdma.h"
#include "plan/planner.h"

namespace gpurdma::exec {
class Executor;
}  // namespace gpurdma::exec

namespace gpurdma::testing {

struct SimulationResult {
    bool ok = false;
    std::string error;  // deadlock or transport misuse
    std::vector<std::vector<char>> outputs;  // each rank's receive buffer
    size_t rounds = 0;  // scheduler rounds until done
    size_t messages = 0;
};

// inputs[r] is rank r's send buffer (count * dtype size bytes). in_place runs every
// rank with its input already in the receive buffer.
SimulationResult simulate(const std::vector<std::vector<char>> &inputs, size_t count, gpurdma_dtype_t dtype,
                          gpurdma_op_t op, bool in_place, const plan::PlanParams &params, int slots);

// The same on a given topology (nodes of any sizes); topo.size == inputs.size().
SimulationResult simulate(const topo::Topology &topo, const std::vector<std::vector<char>> &inputs, size_t count,
                          gpurdma_dtype_t dtype, gpurdma_op_t op, bool in_place, const plan::PlanParams &params,
                          int slots);

// Rank r's local work (exec/local_work.h), owned by the caller; null: the host's.
using LocalWorkFor = std::function<exec::LocalWork *(int rank)>;
// Gives rank r's executor what its schedule needs beyond the user buffers (a staging
// buffer, the node's send buffers: plan/device_unit.h); receive[k] is rank k's receive
// buffer (every rank's exists by then).
using ExecutorSetup =
    std::function<void(int rank, exec::Executor &executor, const std::vector<std::vector<char>> &receive)>;

// Runs the given schedules (one per rank, schedules[r] for rank r) instead of the
// planner's: stages built on their own (plan/rail.h). A released message's bytes are
// overwritten (and kept until the end), so local work that reads an arrival after its
// slot went back to the sender computes garbage.
SimulationResult simulate_schedules(const topo::Topology &topo, const std::vector<plan::Schedule> &schedules,
                                    const std::vector<std::vector<char>> &inputs, size_t count, gpurdma_dtype_t dtype,
                                    gpurdma_op_t op, bool in_place, int slots, const LocalWorkFor &work = {},
                                    const ExecutorSetup &setup = {});

// Runs the given schedules (the collectives': plan/collective.h) on buffers of any
// sizes: sends[r] is rank r's send buffer (unused in place: Send aliases Recv),
// receives[r] its receive buffer as the call starts; each executor gets a Stage buffer
// of its schedule's stage_bytes (filled with 0x77). outputs: the receive buffers at the end.
SimulationResult simulate_buffers(const topo::Topology &topo, const std::vector<plan::Schedule> &schedules,
                                  const std::vector<std::vector<char>> &sends,
                                  const std::vector<std::vector<char>> &receives, gpurdma_dtype_t dtype,
                                  gpurdma_op_t op, bool in_place, int slots);

}  // namespace gpurdma::testing
