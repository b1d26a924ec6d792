// Runs one rank's schedule over a PeerTransport as a resumable state machine:
// advance() does all the work it can without waiting and returns. The schedule
// allreduce (algo/schedule_allreduce.h) runs it under exec::ProgressLoop; the
// simulator interleaves many ranks in one thread. Local work (copies, reductions,
// what a send reads) goes through an exec::LocalWork: the host's, done at once, or a
// GPU's, queued on a stream (the rail stage of GPU buffers across nodes); a step whose
// work is still running is finished on a later advance(): a receive's slot goes back
// to its sender, and a staged send is sent, only once the work is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "exec/local_work.h"
#include "exec/progress.h"
#include "exec/task.h"
#include "gpurdma/gpurdma.h"
#include "plan/schedule.h"
#include "transport/transport.h"

namespace gpurdma::exec {

class Executor {
public:
    // sendbuf == nullptr means in place. The schedule and work must outlive the executor.
    Executor(const plan::Schedule &schedule, transport::PeerTransport &transport, gpurdma_op_t op,
             gpurdma_dtype_t dtype, const void *sendbuf, void *recvbuf, LocalWork &work = HostLocalWork::instance());

    // A GPU unit's schedule (plan/device_unit.h): the staging buffer its Stage steps
    // address, and the node members' send buffers (member order) of its NodeReduce.
    // Both must outlive the executor.
    void set_stage(void *stage) { stage_ = static_cast<char *>(stage); }
    void set_node_sources(const std::vector<const void *> *bases) { node_ = bases; }
    // Steps from `limit` on wait (Running) until the limit is raised: a unit's rail
    // waits for the unit before it (wire order). SIZE_MAX: none.
    void set_limit(size_t limit) { limit_ = limit; }
    // Where stage changes and sent bytes are noted (the communicator's open call); null: nowhere.
    void set_recorder(obs::FlightRecorder *recorder) { recorder_ = recorder; }

    // Executes steps until one must wait. Returns Done only when every step has run
    // and no send still reads a user buffer.
    State advance();

    // Index of the step waited on, or steps.size() when done.
    size_t position() const { return pc_; }
    const plan::Step *current() const;
    // Whether the current step waits for its own local work (a GPU's), not for a peer.
    bool working() const { return phase_ == StepPhase::Working; }
    const std::string &error() const { return error_; }

private:
    // Where the current step is: not begun; its local work started (copy, reduction,
    // a send's staging copy); that work done, only the completion left (a send that
    // waits for a landing slot).
    enum class StepPhase { Begin, Working, Complete };

    const void *source(plan::Buf buf, size_t off) const;
    void *destination(plan::Buf buf, size_t off) const;
    bool run_step(const plan::Step &step, bool *failed);
    bool begin(const plan::Step &step, bool *failed);
    bool complete(const plan::Step &step, bool *failed);
    bool ok(const Status &st, bool *failed);

    const plan::Schedule &schedule_;
    transport::PeerTransport &transport_;
    gpurdma_op_t op_;
    gpurdma_dtype_t dtype_;
    const char *send_;
    char *recv_;
    LocalWork &work_;
    char *stage_ = nullptr;
    const std::vector<const void *> *node_ = nullptr;
    std::vector<const void *> node_spans_;  // a NodeReduce's sources
    size_t limit_ = SIZE_MAX;
    size_t pc_ = 0;
    size_t noted_ = 0;
    obs::FlightRecorder *recorder_ = nullptr;  // 1 + the step whose stage change the flight recorder was told of
    StepPhase phase_ = StepPhase::Begin;
    const void *send_from_ = nullptr;  // the current send's source (staged or not)
    std::string error_;
};

// Memory that an abandoned schedule's sends may still read.
struct SourceRange {
    const void *ptr;
    size_t bytes;
};

// Before memory that a failed call's sends may still read is freed (or reused): drives
// the network under `loop` until no send on `transport` reads any of `ranges`. A send
// under way cannot be recalled, only completed; an executor that failed or was
// abandoned mid-schedule may leave some. Bounded by the loop's timeout (the error's
// message names `what`, e.g. "teardown, waiting for ...").
Status wait_until_unread(const ProgressLoop &loop, transport::PeerTransport &transport,
                         const std::vector<SourceRange> &ranges, const std::string &what);

}  // namespace gpurdma::exec
