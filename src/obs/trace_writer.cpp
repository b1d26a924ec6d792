#include "obs/trace_writer.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "gpurdma/gpurdma.h"
#include "obs/file_write.h"
#include "obs/json.h"
#include "obs/process_id.h"
#include "obs/ticks.h"
#include "plan/collective.h"
#include "plan/schedule.h"

namespace gpurdma::obs {

namespace {

// The stage's thread track (1..4; 0 is the calls').
int stage_track(uint8_t phase)
{
    switch (static_cast<plan::Phase>(phase)) {
        case plan::Phase::NodeReduceScatter: return 1;
        case plan::Phase::NodeAllgather: return 3;
        case plan::Phase::StageOut:
        case plan::Phase::StageBack: return 4;
        default: return 2;
    }
}

const char *const kTrackNames[] = {"calls", "node reduce-scatter", "exchanges (rail)", "node all-gather", "GPU copies"};

std::string slice(const std::string &name, const char *category, double start_us, double dur_us, int pid, int tid,
                  const std::string &args)
{
    return "{\"name\": " + json_text(name) + ", \"cat\": \"" + category +
           "\", \"ph\": \"X\", \"ts\": " + json_number(start_us, 3) + ", \"dur\": " + json_number(dur_us, 3) +
           ", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) + ", \"args\": {" + args + "}}";
}

std::string metadata(const char *what, int pid, int tid, const std::string &name)
{
    return std::string("{\"name\": \"") + what + "\", \"ph\": \"M\", \"pid\": " + std::to_string(pid) +
           ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + json_text(name) + "}}";
}

}  // namespace

std::string trace_document(const FlightRecorder::Snapshot &s, int world_rank, const std::string &host, int index)
{
    const TickClock &clock = TickClock::process();
    const int pid = world_rank >= 0 ? world_rank : s.rank;
    const int base = index * 8;  // this communicator's thread tracks
    // Microseconds of rank 0's clock since the agreed epoch: this rank's time less its
    // measured offset. One rate for the whole file, so that a stage's slice stays inside
    // its call's.
    const double per_tick = clock.seconds_per_tick();
    const auto at_us = [&](uint64_t ticks) {
        return (clock.seconds_since(s.clock_epoch_s, ticks, per_tick) - s.clock_offset_s) * 1e6;
    };
    std::string j = "{\"displayTimeUnit\": \"ns\",\n \"otherData\": {\"communicator\": " + json_text(s.name) +
                    ", \"rank\": " + std::to_string(s.rank) + ", \"size\": " + std::to_string(s.size) +
                    ", \"world_rank\": " + std::to_string(pid) + ", \"host\": " + json_text(host) +
                    ", \"clock_offset_us\": " + json_number(s.clock_offset_s * 1e6, 3) +
                    ", \"clock_error_us\": " + json_number(s.clock_error_s * 1e6, 3) +
                    ", \"epoch_unix_s\": " + json_number(s.clock_epoch_s, 0) + "},\n \"traceEvents\": [\n  ";
    j += metadata("process_name", pid, 0, "rank " + std::to_string(pid) + " (" + host + ")");
    for (int t = 0; t < 5; ++t) j += ",\n  " + metadata("thread_name", pid, base + t, s.name + ": " + kTrackNames[t]);
    for (const CallRecord &c : s.calls) {
        if (!c.end) continue;  // in flight: no closed slice to draw
        const std::string coll = c.barrier ? "barrier" : plan::coll_name(static_cast<plan::Coll>(c.coll));
        const std::string args = "\"seq\": " + std::to_string(c.seq) + ", \"bytes\": " + std::to_string(c.bytes) +
                                 ", \"count\": " + std::to_string(c.count) + ", \"datatype\": " +
                                 json_text(gpurdma_dtype_name(static_cast<gpurdma_dtype_t>(c.dtype)));
        const double start = at_us(c.begin);
        j += ",\n  " +
             slice(coll + " " + std::to_string(c.bytes) + " B", "call", start, at_us(c.end) - start, pid, base, args);
        for (int i = 0; i < c.stages && i < CallRecord::kStages; ++i) {
            const StageSpan &st = c.stage[i];
            if (!st.end) continue;
            const double s0 = at_us(st.begin);
            j += ",\n  " + slice(plan::phase_name(static_cast<plan::Phase>(st.phase)), "stage", s0, at_us(st.end) - s0,
                                 pid, base + stage_track(st.phase),
                                 args + ", \"peer\": " + std::to_string(st.peer) +
                                     ", \"bytes_sent\": " + std::to_string(st.bytes));
        }
    }
    return j + "\n ]\n}\n";
}

std::string write_trace(const std::string &dir, const FlightRecorder &recorder, std::string *why)
{
    static std::atomic<int> traced{0};
    const int index = traced.fetch_add(1);
    const std::string host = host_name();
    const char *world = world_rank_text();
    const std::string text = trace_document(recorder.snapshot(), *world ? std::atoi(world) : -1, host, index);
    return write_file(dir,
                      "gpurdma-trace-" + host + "-" + std::to_string(getpid()) + "-" + std::to_string(index) + ".json",
                      text, why);
}

}  // namespace gpurdma::obs
