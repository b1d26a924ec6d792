// A communicator's flight recorder: its last N calls (sequence number, collective,
// count, bytes, type, op, root, path, state) with the start and end of each stage
// (node reduce-scatter, the rail's rounds, node all-gather, GPU copies) and the peer
// of the step that entered it, so that a live dump (obs/dump_service.h) can say what a
// stuck or slow job was doing. Written only by whoever drives the communicator (one
// call at a time runs); read by the dump thread through a sequence lock per entry, so
// the writer never waits and never takes a lock. A call that ends at once (the latency
// path) costs a few stores and one copy of its 56-byte header into the ring, and reads
// no clock; stages are stamped where they change (the schedules'), and a call's start
// and end where it has stages, waits long enough to be noted, or a trace is kept.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "obs/ticks.h"

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
    // The header (5 words): all a call that ends at once publishes.
    uint64_t seq = 0;  // the communicator's call number (the same on every rank)
    uint64_t count = 0;
    uint64_t bytes = 0;  // the call's whole message (count x type size; the sum for vector counts)
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
    // Published where the call was timed (stages, a noted wait, a trace).
    uint64_t begin = 0;  // ticks
    uint64_t end = 0;  // ticks; 0 in flight
    StageSpan stage[kStages];
};

// The path a call took, as the dump names it.
enum class RecorderPath : uint8_t { Unknown, Host, Device, Staged };

class FlightRecorder {
public:
    // depth 0: no history. The call in flight still reaches the dump once it waits long
    // enough to be noted (and the number of calls begun always does), which costs the
    // latency path one store. Else the last `depth` calls (rounded up to a power of two:
    // a mask, not a division, finds a call's entry).
    FlightRecorder(std::string name, int rank, int size, size_t depth);
    FlightRecorder(const FlightRecorder &) = delete;
    FlightRecorder &operator=(const FlightRecorder &) = delete;

    bool history() const { return history_; }

    // Stamp every call's start and end (a trace wants them), not only those whose
    // schedules stamp stages or that wait (the latency path then reads no clock).
    void set_stamp_all(bool all) { stamp_all_ = all; }

    // What fills a record from the caller's description of its call (`source`): run at
    // open() with a history, else only if the call waits long enough to be noted.
    using Fill = void (*)(const void *source, CallRecord *record);

    // The writer (the communicator's driver, one call at a time). open() starts call
    // `seq`'s record in the writer's copy; with a history it reaches the ring (where a
    // dump sees it) at publish(), at its first stage, at a noted wait, and at close():
    // a blocking call that ends at once is written to the ring once.
    void open(uint64_t seq, const void *source, Fill fill)
    {
        begun_.store(seq, std::memory_order_relaxed);
        current_.seq = seq;
        current_.begin = stamp_all_ ? ticks() : 0;
        current_.end = 0;
        current_.state = CallState::InFlight;
        current_.stages = 0;
        open_ = true;
        published_ = false;
        active_stage_ = -1;
        path_ = RecorderPath::Unknown;
        source_ = source;
        fill_ = fill;
        if (history_) fill(source, &current_);
    }
    // The open call to the ring now (a nonblocking call, which may wait where no loop
    // notes it): with a history only.
    void publish_open()
    {
        if (history_) publish();
    }
    void note_stage(uint8_t phase, int peer);
    // Bytes this rank sent in a stage (published with the next stage change or the end).
    void note_sent(uint8_t phase, uint64_t bytes);
    void set_path(RecorderPath path) { path_ = path; }
    // Ends call `seq`'s record (another call's number: nothing, it was never opened);
    // returns it (its stages, for the counters), or null.
    const CallRecord *close(uint64_t seq, CallState state)
    {
        if (!open_ || seq != current_.seq) return nullptr;
        if (stamp_all_ || current_.begin) {
            const uint64_t now = ticks();
            if (active_stage_ >= 0) current_.stage[active_stage_].end = now;
            current_.end = now;
        }
        current_.state = state;
        open_ = false;
        active_stage_ = -1;
        if (history_ || published_) publish();  // without a history: only a call the dump saw in flight
        return &current_;
    }
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
        uint64_t calls_begun = 0;
        bool history = false;
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
    void publish()
    {
        // The two words; the timed part only for a timed call (never the latency path).
        if (path_ != RecorderPath::Unknown) current_.path = static_cast<uint8_t>(path_);
        Slot &slot = ring_[current_.seq & (depth_ - 1)];
        // Release on the value: a reader that sees it also sees the key's 0 before it (and
        // so a changed key afterwards). Plain stores on x86; no fence, which TSan can't model.
        slot.key.store(0, std::memory_order_relaxed);
        slot.value.store(pack_value(current_), std::memory_order_release);
        slot.key.store(pack_key(current_), std::memory_order_release);
        if (current_.begin) publish_timed();
    }

    // The ring: per call two words, published without a lock: `key` (the sequence number
    // and the small fields; 0 while being written) and `value` (count and root). A
    // reader takes key, value, key again and keeps the pair when both keys match.
    struct Slot {
        std::atomic<uint64_t> key{0};
        std::atomic<uint64_t> value{0};
    };
    // A timed call's start, end and stages, beside the ring (one per slot, made by the
    // first timed call), under a sequence lock: only calls with schedules, noted waits
    // or a trace write it.
    static constexpr size_t kTimedWords = 5 + CallRecord::kStages * sizeof(StageSpan) / sizeof(uint64_t);
    struct Timed {
        std::atomic<uint32_t> version{0};  // odd while being written
        std::atomic<uint64_t> words[kTimedWords];
    };
    static uint64_t pack_key(const CallRecord &r);
    static uint64_t pack_value(const CallRecord &r);
    static void unpack(uint64_t key, uint64_t value, CallRecord *r);
    void publish_timed();
    static size_t round_up_pow2(size_t n);
    static_assert(sizeof(StageSpan) % sizeof(uint64_t) == 0, "stages are copied in words");

    const std::string name_;
    const int rank_;
    const int size_;
    const bool history_;
    const size_t depth_;  // 1 without a history: the call in flight, once noted
    std::unique_ptr<Slot[]> ring_;
    std::unique_ptr<Timed[]> timed_;  // made by the first timed call (the writer's)
    std::atomic<const Timed *> timed_ptr_{nullptr};  // the same, for the reader
    CallRecord current_;  // the writer's copy of the open call
    std::atomic<uint64_t> begun_{0};  // calls begun, for the dump (the history's or not)
    const void *source_ = nullptr;  // the open call's description, for fill_
    Fill fill_ = nullptr;
    RecorderPath path_ = RecorderPath::Unknown;  // set_path's, over the fill's
    bool published_ = false;  // the open call is in the ring
    bool open_ = false;
    bool stamp_all_ = false;
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

}  // namespace gpurdma::obs
