// A communicator's flight record as Chrome / Perfetto trace events (the JSON object
// format: {"traceEvents": [...]}), written when the communicator is freed: one process
// track per rank (pid = the rank in the job), a thread track for its calls and one per
// stage (node reduce-scatter, the schedules' exchanges, node all-gather, GPU copies),
// each call and stage a complete ("X") slice in microseconds of rank 0's clock (the
// offset measured at set-up, obs/clock_alignment.h). contrib/trace-plot.py merges the
// ranks' files and draws them.
#pragma once

#include <string>

#include "obs/flight_recorder.h"

namespace gpurdma::obs {

// The trace document of one communicator's snapshot. world_rank: the track's id
// (-1: the communicator's rank); index: this process's count of traced communicators
// (their thread tracks apart).
std::string trace_document(const FlightRecorder::Snapshot &s, int world_rank, const std::string &host, int index);

// Writes it to <dir>/gpurdma-trace-<host>-<pid>-<index>.json; returns the path, or ""
// with *why set.
std::string write_trace(const std::string &dir, const FlightRecorder &recorder, std::string *why);

}  // namespace gpurdma::obs
