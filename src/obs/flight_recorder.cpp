#include "obs/flight_recorder.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "gpurdma/gpurdma.h"
#include "obs/ticks.h"

namespace gpurdma::obs {

FlightRecorder::FlightRecorder(std::string name, int rank, int size, size_t depth)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      history_(depth > 0),
      depth_(depth > 0 ? round_up_pow2(depth) : 1),
      ring_(new Slot[depth_])  // 16 bytes a call; keys start zero: empty
{}

size_t FlightRecorder::round_up_pow2(size_t n)
{
    size_t p = 1;
    while (n && p < n) p <<= 1;
    return n ? p : 0;
}

// key: sequence number (40 bits), state (3), kind (2), barrier (1), path (2), op (4),
// datatype (5), collective (3). value: count (40 bits), root + 1 (24 bits).
static_assert(GPURDMA_DTYPE_COUNT <= 32 && GPURDMA_OP_COUNT <= 16, "the key's fields hold every type and op");
uint64_t FlightRecorder::pack_key(const CallRecord &r)
{
    return (r.seq << 24) | (uint64_t(r.state) & 7) << 21 | (uint64_t(r.kind) & 3) << 19 |
           (uint64_t(r.barrier) & 1) << 18 | (uint64_t(r.path) & 3) << 16 | (uint64_t(r.op) & 15) << 12 |
           (uint64_t(r.dtype) & 31) << 7 | (uint64_t(r.coll) & 7) << 4;
}

uint64_t FlightRecorder::pack_value(const CallRecord &r)
{
    const uint64_t count = r.count < (uint64_t{1} << 40) ? r.count : (uint64_t{1} << 40) - 1;
    return count | (static_cast<uint64_t>(r.root + 1) & 0xffffff) << 40;
}

void FlightRecorder::unpack(uint64_t key, uint64_t value, CallRecord *r)
{
    r->seq = key >> 24;
    r->state = static_cast<CallState>((key >> 21) & 7);
    r->kind = (key >> 19) & 3;
    r->barrier = (key >> 18) & 1;
    r->path = (key >> 16) & 3;
    r->op = (key >> 12) & 15;
    r->dtype = (key >> 7) & 31;
    r->coll = (key >> 4) & 7;
    r->count = value & ((uint64_t{1} << 40) - 1);
    r->root = static_cast<int32_t>(value >> 40) - 1;
}

// words: sequence number, bytes, begin, end, stages used, then the stages.
void FlightRecorder::publish_timed()
{
    if (!timed_) {
        timed_.reset(new Timed[depth_]);
        timed_ptr_.store(timed_.get(), std::memory_order_release);
    }
    Timed &t = timed_[current_.seq & (depth_ - 1)];
    uint64_t words[kTimedWords];
    words[0] = current_.seq;
    words[1] = current_.bytes;
    words[2] = current_.begin;
    words[3] = current_.end;
    words[4] = current_.stages;
    std::memcpy(words + 5, current_.stage, sizeof current_.stage);
    const size_t used = 5 + current_.stages * sizeof(StageSpan) / sizeof(uint64_t);
    const uint32_t v = t.version.load(std::memory_order_relaxed);
    t.version.store(v + 1, std::memory_order_relaxed);
    // Release on each word: a reader that sees one also sees the odd version before it.
    for (size_t i = 0; i < used; ++i) t.words[i].store(words[i], std::memory_order_release);
    t.version.store(v + 2, std::memory_order_release);
}

void FlightRecorder::note_stage(uint8_t phase, int peer)
{
    if (!open_) return;
    const uint64_t now = ticks();
    if (!current_.begin) current_.begin = now;  // the call is timed from its first stage
    if (active_stage_ >= 0) current_.stage[active_stage_].end = now;
    int found = -1;
    for (int i = 0; i < current_.stages; ++i)
        if (current_.stage[i].phase == phase) found = i;
    if (found < 0) {
        if (current_.stages == CallRecord::kStages) return;  // the first kStages stages only
        found = current_.stages++;
        current_.stage[found].phase = phase;
        current_.stage[found].begin = now;
        current_.stage[found].bytes = 0;
    }
    current_.stage[found].end = 0;
    current_.stage[found].peer = peer;
    active_stage_ = found;
    if (history_ || published_) publish();
}

void FlightRecorder::note_sent(uint8_t phase, uint64_t bytes)
{
    if (!open_) return;
    for (int i = 0; i < current_.stages; ++i)
        if (current_.stage[i].phase == phase) {
            current_.stage[i].bytes += bytes;
            return;
        }
}

void FlightRecorder::note_wait(const std::string &where, double idle_s)
{
    if (!open_) return;
    // Called by the thread that drives the call (its wait loop): the writer. The call
    // in flight reaches the ring now, timed from when its wait began if it had no start.
    if (!published_ && !history_ && fill_) fill_(source_, &current_);  // deferred until now
    if (!current_.begin) {
        const double per_tick = TickClock::process().seconds_per_tick();
        current_.begin = ticks() - static_cast<uint64_t>(idle_s / per_tick);
    }
    publish();
    published_ = true;
    std::lock_guard<std::mutex> hold(notes_);
    waiting_seq_ = current_.seq;
    waiting_in_ = where;
    waiting_idle_s_ = idle_s;
}

void FlightRecorder::set_hosts(const std::vector<std::string> &hosts)
{
    std::lock_guard<std::mutex> hold(notes_);
    hosts_ = hosts;
}

void FlightRecorder::set_broken(const std::string &error)
{
    std::lock_guard<std::mutex> hold(notes_);
    if (broken_.empty()) broken_ = error;
}

void FlightRecorder::set_clock(double offset_s, double error_s, double epoch_s)
{
    std::lock_guard<std::mutex> hold(notes_);
    clock_offset_s_ = offset_s;
    clock_error_s_ = error_s;
    clock_epoch_s_ = epoch_s;
}

FlightRecorder::Snapshot FlightRecorder::snapshot() const
{
    Snapshot s;
    s.name = name_;
    s.rank = rank_;
    s.size = size_;
    {
        std::lock_guard<std::mutex> hold(notes_);
        s.hosts = hosts_;
        s.broken = broken_;
        s.waiting_seq = waiting_seq_;
        s.waiting_in = waiting_in_;
        s.waiting_idle_s = waiting_idle_s_;
        s.clock_offset_s = clock_offset_s_;
        s.clock_error_s = clock_error_s_;
        s.clock_epoch_s = clock_epoch_s_;
    }
    s.calls_begun = begun_.load(std::memory_order_relaxed);
    s.history = history_;
    for (size_t i = 0; i < depth_; ++i) {
        const Slot &slot = ring_[i];
        for (int attempt = 0; attempt < 1000; ++attempt) {
            const uint64_t key = slot.key.load(std::memory_order_acquire);
            if (key == 0) break;  // empty, or being written (then it is the call in flight, seen next time)
            // Acquire: the key's second read comes after the value's.
            const uint64_t value = slot.value.load(std::memory_order_acquire);
            if (slot.key.load(std::memory_order_relaxed) != key) continue;
            CallRecord r;
            unpack(key, value, &r);
            r.bytes = 0;
            s.calls.push_back(r);
            break;
        }
    }
    std::sort(s.calls.begin(), s.calls.end(), [](const CallRecord &x, const CallRecord &y) { return x.seq < y.seq; });
    if (const Timed *timed = timed_ptr_.load(std::memory_order_acquire)) {
        for (CallRecord &r : s.calls) {
            const Timed &t = timed[r.seq & (depth_ - 1)];
            for (int attempt = 0; attempt < 1000; ++attempt) {
                const uint32_t v1 = t.version.load(std::memory_order_acquire);
                if (v1 & 1u) continue;
                uint64_t words[kTimedWords];
                for (size_t i = 0; i < kTimedWords; ++i) words[i] = t.words[i].load(std::memory_order_acquire);
                if (t.version.load(std::memory_order_relaxed) != v1) continue;
                if (words[0] == r.seq) {  // this call's (not an older one's in the same place)
                    r.bytes = words[1];
                    r.begin = words[2];
                    r.end = words[3];
                    r.stages = static_cast<uint8_t>(words[4] <= CallRecord::kStages ? words[4] : 0);
                    std::memcpy(static_cast<void *>(r.stage), words + 5, sizeof r.stage);
                }
                break;
            }
        }
    }
    // A note about a call that has since moved on is stale.
    bool in_flight = false;
    for (const CallRecord &r : s.calls)
        if (r.seq == s.waiting_seq && r.state == CallState::InFlight) in_flight = true;
    if (!in_flight) {
        s.waiting_seq = 0;
        s.waiting_in.clear();
    }
    return s;
}

}  // namespace gpurdma::obs
