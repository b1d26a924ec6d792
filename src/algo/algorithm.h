// The one interface every allreduce path implements: the schedule-driven ones (ring,
// recursive doubling, hierarchical over exec::Executor), the one-node shared-memory
// allreduce and the device allreduce. Whatever a path needs per communicator (its
// media, its shared layout, its kernels) it sets up in its constructor or factory;
// a call is then start() and the progress loop's advance() until done. The
// communicator's dispatcher (core/comm.cpp) knows nothing of any path's insides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "exec/progress.h"
#include "exec/task.h"
#include "gpurdma/gpurdma.h"
#include "plan/collective.h"

namespace gpurdma::algo {

// One collective call. sendbuf == nullptr: in place (the data is in recvbuf). count,
// by collective (plan/collective.h has the buffers' layouts):
//   Allreduce, Reduce, Bcast: the message's elements;
//   Allgather: each rank's block;
//   ReduceScatter: each rank's result, unless `counts` (one per rank) is given.
// Bcast's buffer is recvbuf; Reduce's recvbuf matters at the root only.
struct Call {
    plan::Coll coll = plan::Coll::Allreduce;
    const void *sendbuf = nullptr;
    void *recvbuf = nullptr;
    size_t count = 0;
    gpurdma_dtype_t dtype = GPURDMA_BYTE;
    gpurdma_op_t op = GPURDMA_BOR;
    int root = 0;
    std::vector<size_t> counts;  // ReduceScatter with a count per rank (MPI_Reduce_scatter)
    bool barrier = false;  // MPI_Barrier's one-byte allreduce (core/barrier.cpp): counted apart
    bool in_place() const { return sendbuf == nullptr; }
    bool reduces() const { return coll != plan::Coll::Allgather && coll != plan::Coll::Bcast; }
};

// The call's name in messages: its collective's, or "barrier".
inline const char *call_name(const Call &call)
{
    return call.barrier ? "barrier" : plan::coll_name(call.coll);
}

class Algorithm : public exec::Task {
public:
    // Begins one call without waiting for peers (an algorithm whose set-up depends on
    // the first call's buffers, like the device allreduce, runs that collective set-up
    // here once; every rank calls start for the same call). Ok: drive it with exec::ProgressLoop until
    // Done. Unsupported: the same answer on every rank, nothing sent; another path
    // takes the call. Another error: names the stage (and the peer, if any).
    virtual Status start(const Call &call) = 0;
    // Before a call is queued (nonblocking) or planned ahead (persistent), in the thread
    // that starts it, on every rank alike: whatever start() would do that talks to every
    // rank through the bootstrap (a set-up on first use), and whatever planning can be
    // done ahead (schedules). start() may then run from any thread's progress. Cheap
    // once done; Unsupported as for start().
    virtual Status prepare(const Call &call)
    {
        (void)call;
        return Status::ok();
    }
    // Drives the started call to its end under `loop` (a blocking call with nothing
    // queued). An algorithm of a final class overrides it with loop.run_as(*this), so
    // that the loop calls its advance() directly: the small-message path.
    virtual Status run(const exec::ProgressLoop &loop) { return loop.run(*this); }
    // After Done: the bookkeeping of the finished call (sequence numbers, counters).
    virtual void finish() {}
    // The per-algorithm counter a completed call adds to (gpurdma_comm_stats_t).
    virtual uint64_t gpurdma_comm_stats_t::*counter() const = 0;
    // One line for verbose 2 about the started call: "ring, 14 steps", "node allreduce, direct".
    virtual std::string describe_call() const = 0;

    // The flight recorder whose open call this algorithm's executors note their stages in
    // (set by the communicator before start(); null: none).
    void record_to(obs::FlightRecorder *recorder) { recorder_ = recorder; }
    obs::FlightRecorder *recorder() const override { return recorder_; }

protected:
    obs::FlightRecorder *recorder_ = nullptr;
};

}  // namespace gpurdma::algo
