#include "support/simulator.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <utility>

#include "exec/executor.h"
#include "reduce/reduce.h"
#include "transport/transport.h"

namespace gpurdma::testing {

using exec::Executor;
using exec::State;

namespace {

// All directed channels of the simulated group: FIFO of copied messages, at most
// `slots` unconsumed per channel, as the landing slots allow on the real path.
class Fabric {
public:
    explicit Fabric(int slots) : slots_(slots) {}

    struct Channel {
        std::deque<std::vector<char>> queue;
        bool held = false;  // front returned by try_receive, not yet released
    };

    Channel &channel(int from, int to) { return channels_[{from, to}]; }
    int slots() const { return slots_; }
    size_t messages = 0;
    // Released messages, overwritten and kept to the end: work that still reads one
    // (reported done too early) reads the filler, never freed memory.
    std::vector<std::vector<char>> retired;

private:
    int slots_;
    std::map<std::pair<int, int>, Channel> channels_;
};

class SimTransport : public transport::PeerTransport {
public:
    SimTransport(Fabric &fabric, int rank, int size, std::vector<int> peers)
        : fabric_(fabric), rank_(rank), size_(size), peers_(std::move(peers))
    {}

    transport::Poll try_send(int peer, const void *src, size_t bytes, transport::Reader) override
    {
        if (!valid(peer)) return transport::Poll::Failed;
        auto &ch = fabric_.channel(rank_, peer);
        if (static_cast<int>(ch.queue.size()) >= fabric_.slots()) return transport::Poll::WouldBlock;
        const char *p = static_cast<const char *>(src);
        ch.queue.emplace_back(p, p + bytes);
        ++fabric_.messages;
        return transport::Poll::Done;
    }

    const void *try_receive(int peer, size_t bytes, transport::Reader) override
    {
        if (!valid(peer)) return nullptr;
        auto &ch = fabric_.channel(peer, rank_);
        if (ch.queue.empty()) return nullptr;
        if (ch.queue.front().size() != bytes) {
            error_ = "message size mismatch from rank " + std::to_string(peer) + ": expected " + std::to_string(bytes) +
                     ", got " + std::to_string(ch.queue.front().size());
            mismatch_ = true;
            return nullptr;
        }
        ch.held = true;
        return ch.queue.front().data();
    }

    void release(int peer) override
    {
        auto &ch = fabric_.channel(peer, rank_);
        ch.held = false;
        // The slot is the sender's again: whatever still reads it reads something else.
        std::fill(ch.queue.front().begin(), ch.queue.front().end(), char(0x5a));
        fabric_.retired.push_back(std::move(ch.queue.front()));
        ch.queue.pop_front();
    }

    bool source_busy(const void *, size_t) override { return false; }
    bool sends_pending() override { return false; }
    const char *error() const override { return error_.c_str(); }
    bool failed() const override { return mismatch_; }
    bool mismatch() const { return mismatch_; }

private:
    // Only peers the plan declared may be used: the real transports have no others.
    bool valid(int peer)
    {
        if (peer >= 0 && peer < size_ && peer != rank_ && std::binary_search(peers_.begin(), peers_.end(), peer))
            return true;
        error_ = "peer " + std::to_string(peer) + " is not in plan::peers of rank " + std::to_string(rank_);
        mismatch_ = true;
        return false;
    }

    Fabric &fabric_;
    int rank_;
    int size_;
    std::vector<int> peers_;
    std::string error_;
    bool mismatch_ = false;
};

}  // namespace

SimulationResult simulate(const std::vector<std::vector<char>> &inputs, size_t count, gpurdma_dtype_t dtype,
                          gpurdma_op_t op, bool in_place, const plan::PlanParams &params, int slots)
{
    return simulate(plan::single_node(static_cast<int>(inputs.size())), inputs, count, dtype, op, in_place, params,
                    slots);
}

SimulationResult simulate(const topo::Topology &topo, const std::vector<std::vector<char>> &inputs, size_t count,
                          gpurdma_dtype_t dtype, gpurdma_op_t op, bool in_place, const plan::PlanParams &params,
                          int slots)
{
    const int size = static_cast<int>(inputs.size());
    const size_t elem = reduce::dtype_size(dtype);
    std::vector<plan::Schedule> schedules;
    schedules.reserve(size);
    for (int r = 0; r < size; ++r) schedules.push_back(plan::build(topo, r, count, elem, in_place, params));
    return simulate_schedules(topo, schedules, inputs, count, dtype, op, in_place, slots);
}

namespace {

// Runs schedules[r] for every rank r with send buffer sends[r] (nullptr: in place) over
// result->outputs (the receive buffers, already sized and filled); stages[r], when
// given, is rank r's Stage buffer.
void run_all(const topo::Topology &topo, const std::vector<plan::Schedule> &schedules,
             const std::vector<const char *> &sends, std::vector<std::vector<char>> *stages, gpurdma_dtype_t dtype,
             gpurdma_op_t op, int slots, const LocalWorkFor &work, const ExecutorSetup &setup, SimulationResult &result)
{
    const int size = static_cast<int>(schedules.size());
    Fabric fabric(slots);
    std::vector<std::unique_ptr<SimTransport>> transports;
    std::vector<std::unique_ptr<Executor>> executors;
    for (int r = 0; r < size; ++r) {
        transports.push_back(std::make_unique<SimTransport>(fabric, r, size, plan::peers(topo, r)));
        exec::LocalWork *w = work ? work(r) : nullptr;
        executors.push_back(std::make_unique<Executor>(schedules[r], *transports[r], op, dtype, sends[r],
                                                       result.outputs[r].data(),
                                                       w ? *w : exec::HostLocalWork::instance()));
        if (stages) executors.back()->set_stage((*stages)[r].data());
        if (setup) setup(r, *executors.back(), result.outputs);
    }
    std::vector<bool> done(size, false);
    int remaining = size;
    // A rank may wait a few rounds on its own (local work with no staging buffer free
    // yet); a deadlock is a run of rounds in which nobody moves.
    constexpr int kIdleRoundsMax = 64;
    int idle_rounds = 0;
    while (remaining > 0) {
        ++result.rounds;
        bool moved = false;
        for (int r = 0; r < size; ++r) {
            if (done[r]) continue;
            const size_t before = executors[r]->position();
            const State st = executors[r]->advance();
            if (st == State::Failed || transports[r]->mismatch()) {
                const std::string &why = executors[r]->error();
                result.error = "rank " + std::to_string(r) + ": " + (why.empty() ? transports[r]->error() : why);
                return;
            }
            // Local work still running finishes on its own: the rank is not stuck.
            if (executors[r]->position() != before || executors[r]->working()) moved = true;
            if (st == State::Done) {
                done[r] = true;
                --remaining;
                moved = true;
            }
        }
        idle_rounds = moved ? 0 : idle_rounds + 1;
        if (idle_rounds > kIdleRoundsMax) {
            result.error = "deadlock: no rank can make progress";
            for (int r = 0; r < size; ++r) {
                if (done[r]) continue;
                const plan::Step *s = executors[r]->current();
                result.error += "; rank " + std::to_string(r) + " waits in " + plan::phase_name(s->phase) + " (" +
                                plan::step_kind_name(s->kind) + " peer " + std::to_string(s->peer) + ")";
                break;
            }
            return;
        }
    }
    // Every message sent must have been consumed.
    for (int a = 0; a < size; ++a)
        for (int b = 0; b < size; ++b)
            if (a != b && !fabric.channel(a, b).queue.empty()) {
                result.error = "unconsumed message from rank " + std::to_string(a) + " to " + std::to_string(b);
                return;
            }
    result.messages = fabric.messages;
    result.ok = true;
}

}  // namespace

SimulationResult simulate_schedules(const topo::Topology &topo, const std::vector<plan::Schedule> &schedules,
                                    const std::vector<std::vector<char>> &inputs, size_t count, gpurdma_dtype_t dtype,
                                    gpurdma_op_t op, bool in_place, int slots, const LocalWorkFor &work,
                                    const ExecutorSetup &setup)
{
    SimulationResult result;
    const size_t elem = reduce::dtype_size(dtype);
    std::vector<const char *> sends;
    result.outputs.resize(inputs.size());
    for (size_t r = 0; r < inputs.size(); ++r) {
        result.outputs[r].assign(count * elem, 0);
        if (in_place) result.outputs[r] = inputs[r];
        sends.push_back(in_place ? nullptr : inputs[r].data());
    }
    run_all(topo, schedules, sends, nullptr, dtype, op, slots, work, setup, result);
    return result;
}

SimulationResult simulate_buffers(const topo::Topology &topo, const std::vector<plan::Schedule> &schedules,
                                  const std::vector<std::vector<char>> &sends,
                                  const std::vector<std::vector<char>> &receives, gpurdma_dtype_t dtype,
                                  gpurdma_op_t op, bool in_place, int slots)
{
    SimulationResult result;
    result.outputs = receives;
    std::vector<const char *> send_ptrs;
    std::vector<std::vector<char>> stages;
    for (size_t r = 0; r < schedules.size(); ++r) {
        send_ptrs.push_back(in_place ? nullptr : sends[r].data());
        // Filler, not zeros: an accumulator read before it is written shows.
        stages.emplace_back(schedules[r].stage_bytes, char(0x77));
    }
    run_all(topo, schedules, send_ptrs, &stages, dtype, op, slots, {}, {}, result);
    return result;
}

}  // namespace gpurdma::testing
