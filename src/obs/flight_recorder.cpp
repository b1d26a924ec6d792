#include "obs/flight_recorder.h"

#include <cstring>
#include <utility>

#include "obs/ticks.h"

namespace gpurdma::obs {

thread_local FlightRecorder *t_active_recorder = nullptr;

FlightRecorder::FlightRecorder(std::string name, int rank, int size, size_t depth)
    : name_(std::move(name)), rank_(rank), size_(size), depth_(depth)
{}

CallRecord *FlightRecorder::open(uint64_t seq)
{
    if (!depth_) return nullptr;
    if (!ring_) ring_.reset(new Entry[depth_]);  // words start zero: Empty records
    current_ = CallRecord{};
    current_.seq = seq;
    current_.begin = ticks();
    current_.state = CallState::InFlight;
    open_ = true;
    active_stage_ = -1;
    return &current_;
}

void FlightRecorder::publish()
{
    if (!depth_ || !ring_) return;
    Entry &e = ring_[current_.seq % depth_];
    const uint32_t v = e.version.load(std::memory_order_relaxed);
    e.version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    uint64_t words[kWords];
    std::memcpy(words, &current_, sizeof words);
    for (size_t i = 0; i < kWords; ++i) e.words[i].store(words[i], std::memory_order_relaxed);
    e.version.store(v + 2, std::memory_order_release);
    newest_.store(current_.seq, std::memory_order_release);
}

void FlightRecorder::note_stage(uint8_t phase, int peer)
{
    if (!open_) return;
    const uint64_t now = ticks();
    if (active_stage_ >= 0) current_.stage[active_stage_].end = now;
    int found = -1;
    for (int i = 0; i < current_.stages; ++i)
        if (current_.stage[i].phase == phase) found = i;
    if (found < 0) {
        if (current_.stages == CallRecord::kStages) return;  // the first kStages stages only
        found = current_.stages++;
        current_.stage[found].phase = phase;
        current_.stage[found].begin = now;
    }
    current_.stage[found].end = 0;
    current_.stage[found].peer = peer;
    active_stage_ = found;
    publish();
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

void FlightRecorder::set_path(RecorderPath path)
{
    if (!open_) return;
    current_.path = static_cast<uint8_t>(path);
}

const CallRecord *FlightRecorder::close(uint64_t seq, CallState state)
{
    if (!open_ || seq != current_.seq) return nullptr;
    const uint64_t now = ticks();
    if (active_stage_ >= 0) current_.stage[active_stage_].end = now;
    current_.end = now;
    current_.state = state;
    open_ = false;
    active_stage_ = -1;
    publish();
    return &current_;
}

void FlightRecorder::note_wait(const std::string &where, double idle_s)
{
    if (!open_) return;
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
    if (!depth_ || !ring_) return s;
    const uint64_t newest = newest_.load(std::memory_order_acquire);
    const uint64_t first = newest >= depth_ ? newest - depth_ + 1 : 1;
    for (uint64_t seq = first; seq <= newest; ++seq) {
        const Entry &e = ring_[seq % depth_];
        CallRecord r;
        for (int attempt = 0; attempt < 1000; ++attempt) {
            const uint32_t v1 = e.version.load(std::memory_order_acquire);
            if (v1 & 1u) continue;
            uint64_t words[kWords];
            for (size_t i = 0; i < kWords; ++i) words[i] = e.words[i].load(std::memory_order_relaxed);
            std::atomic_thread_fence(std::memory_order_acquire);
            if (e.version.load(std::memory_order_relaxed) != v1) continue;
            std::memcpy(&r, words, sizeof r);
            if (r.seq == seq && r.state != CallState::Empty) s.calls.push_back(r);
            break;
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
