// A communicator's flight recorder: its last N calls (sequence number, collective,
// count, bytes, type, op, root, path, state) with the start and end of each stage
// (node reduce-scatter, the rail's rounds, node all-gather, GPU copies) and the peer
// of the step that entered it, so that a live dump (obs/dump_service.h) can say what a
// stuck or slow job was doing. Written only by whoever drives the communicator (one
// call at a time runs); read by the dump thread through a sequence lock per entry, so
// the writer never waits and never takes a lock. A call's record costs two counter
// reads and two small copies; stages are stamped only where they change (schedules
// between nodes, not the one-node latency path).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpurdma::obs {

enum class CallState : uint8_t { Empty, InFlight, Done, Failed, Declined };

// One stage of a call: plan::Phase's value, the peer of the step that entered it.
struct StageSpan {
    uint64_t begin = 0;  // ticks (obs/ticks.h)
    uint64_t end = 0;  // 0 while the stage is the one running
    uint64_t bytes = 0;  // sent by this rank in the stage
    int32_t peer = -1;
    uint8_t phase = 0;
    uint8_t pad[3] = {};
};

struct CallRecord {
    static constexpr int kStages = 6;
    uint64_t seq = 0;  // the communicator's call number (the same on every rank)
    uint64_t count = 0;
    uint64_t bytes = 0;  // the call's whole message (count x type size; the sum for vector counts)
    uint64_t begin = 0;  // ticks
    uint64_t end = 0;  // ticks; 0 in flight
    int32_t root = -1;
    uint8_t coll = 0;  // plan::Coll
    uint8_t dtype = 0;  // gpurdma_dtype_t
    uint8_t op = 0;  // gpurdma_op_t
    uint8_t kind = 0;  // 0 blocking, 1 nonblocking, 2 persistent
    CallState state = CallState::Empty;
    uint8_t path = 0;  // RecorderPath
    uint8_t barrier = 0;
    uint8_t stages = 0;  // spans used
    uint8_t pad[4] = {};
    StageSpan stage[kStages];
};

// The path a call took, as the dump names it.
enum class RecorderPath : uint8_t { Unknown, Host, Device, Staged };

class FlightRecorder {
public:
    // depth 0: off (every call below is then a no-op).
    FlightRecorder(std::string name, int rank, int size, size_t depth);
    FlightRecorder(const FlightRecorder &) = delete;
    FlightRecorder &operator=(const FlightRecorder &) = delete;

    bool enabled() const { return depth_ != 0; }

    // The writer (the communicator's driver, one call at a time). open() starts call
    // `seq`'s record (fill the returned one, then publish()); note_stage() and close()
    // update the open one.
    CallRecord *open(uint64_t seq);
    void publish();
    void note_stage(uint8_t phase, int peer);
    // Bytes this rank sent in a stage (published with the next stage change or the end).
    void note_sent(uint8_t phase, uint64_t bytes);
    void set_path(RecorderPath path);
    // Ends call `seq`'s record (another call's number: nothing, it was never opened);
    // returns it, or null.
    const CallRecord *close(uint64_t seq, CallState state);
    // Whether a call is open (begun and not yet closed).
    bool call_open() const { return open_; }

    // Where the open call waits, as the waiting thread's loop last described it (a
    // wait longer than a few milliseconds; never on the latency path): its stage and peer.
    void note_wait(const std::string &where, double idle_s);
    // The communicator's member hosts, once its set-up knows them.
    void set_hosts(const std::vector<std::string> &hosts);
    void set_broken(const std::string &error);
    // This rank's clock against rank 0's (obs/clock_alignment.h), for the trace.
    void set_clock(double offset_s, double error_s, double epoch_s);

    // Any thread: the records, oldest first, each consistent; the wait note if it is
    // still about the open call.
    struct Snapshot {
        std::string name;
        int rank = 0;
        int size = 0;
        std::vector<std::string> hosts;
        std::vector<CallRecord> calls;
        uint64_t waiting_seq = 0;  // 0: no note for a call in flight
        std::string waiting_in;
        double waiting_idle_s = 0;
        std::string broken;
        double clock_offset_s = 0;
        double clock_error_s = -1;  // negative: not measured
        double clock_epoch_s = 0;
    };
    Snapshot snapshot() const;

private:
    static constexpr size_t kWords = sizeof(CallRecord) / sizeof(uint64_t);
    static_assert(sizeof(CallRecord) % sizeof(uint64_t) == 0, "records are copied in words");
    struct Entry {
        std::atomic<uint32_t> version{0};  // odd while being written
        std::atomic<uint64_t> words[kWords];
    };

    const std::string name_;
    const int rank_;
    const int size_;
    const size_t depth_;
    std::unique_ptr<Entry[]> ring_;  // made by the first call
    std::atomic<uint64_t> newest_{0};  // the newest published sequence number
    CallRecord current_;  // the writer's copy of the open call
    bool open_ = false;
    int active_stage_ = -1;  // the span that runs now

    mutable std::mutex notes_;  // the slow side: wait notes, hosts, the broken message
    uint64_t waiting_seq_ = 0;
    std::string waiting_in_;
    double waiting_idle_s_ = 0;
    std::vector<std::string> hosts_;
    std::string broken_;
    double clock_offset_s_ = 0;
    double clock_error_s_ = -1;
    double clock_epoch_s_ = 0;
};

// The recorder of the call the calling thread drives now (set around an algorithm's
// advance by the communicator), for the executor's stage notes: no plumbing through
// every algorithm, and nothing at all on a thread that records nothing. The default
// TLS model: initial-exec would save a call but can make dlopen of the component fail
// where the static TLS reserve is used up.
extern thread_local FlightRecorder *t_active_recorder;
inline FlightRecorder *active_recorder()
{
    return t_active_recorder;
}
class ActiveRecorder {
public:
    explicit ActiveRecorder(FlightRecorder *recorder) : previous_(t_active_recorder) { t_active_recorder = recorder; }
    ~ActiveRecorder() { t_active_recorder = previous_; }
    ActiveRecorder(const ActiveRecorder &) = delete;
    ActiveRecorder &operator=(const ActiveRecorder &) = delete;

private:
    FlightRecorder *previous_;
};

// Bytes an executor's send put on the wire, for the active call's stage.
inline void note_sent(uint8_t phase, uint64_t bytes)
{
    if (FlightRecorder *r = active_recorder()) r->note_sent(phase, bytes);
}

// Stage change seen by an executor: recorded for the active call, if any.
inline void note_stage(uint8_t phase, int peer)
{
    if (FlightRecorder *r = active_recorder()) r->note_stage(phase, peer);
}

}  // namespace gpurdma::obs
