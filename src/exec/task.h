// What the progress loop drives: one collective call as a resumable state machine.
// advance() does all the work it can without waiting and returns; the loop decides
// how to wait (spin, yield, network progress) and when to give up.
#pragma once

#include <cstdint>
#include <string>

namespace gpurdma::obs {
class FlightRecorder;
}

namespace gpurdma::exec {

enum class State {
    Running,
    Done,
    Failed,  // describe_failure() says where and why; peers learn it through their own waits
    Declined,  // every rank stops this call alike before touching the result: another path takes it
};

class Task {
public:
    virtual ~Task() = default;
    virtual State advance() = 0;
    // Grows whenever anything moved: the loop's idle clock restarts on a change.
    virtual uint64_t position() const = 0;
    // Where the call waits now, for the timeout message: the stage, then the peer,
    // e.g. "ring reduce-scatter (inter-node), waiting for data from rank 3 on host b".
    virtual std::string describe_wait() const = 0;
    // After Failed: what failed, e.g. "allreduce failed in ring allgather with rank 3
    // on host b: <transport error>".
    virtual std::string describe_failure() const = 0;
    // The collective the call is, for the timeout message ("bcast timed out after ...").
    virtual const char *collective() const { return "allreduce"; }
    // The flight recorder of the communicator whose call this is, where the loop notes a
    // long wait (its describe_wait()); null: none.
    virtual obs::FlightRecorder *recorder() const { return nullptr; }
};

}  // namespace gpurdma::exec
