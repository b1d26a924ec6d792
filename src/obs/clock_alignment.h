// Where this rank's clock stands against its communicator's rank 0, for a trace whose
// ranks' slices line up: measured at set-up (only where a trace is asked for) through
// the set-up's own allgather. Every rank leaves an allgather at nearly the same moment
// (none can leave before the last has entered); each notes the time it left, and a
// second allgather shares those times. The offset is rank r's leave time minus rank
// 0's; its error is bounded by how far apart the ranks leave, which is at most one
// allgather's duration: the smallest of three rounds is kept.
#pragma once

#include <functional>

namespace gpurdma::obs {

struct ClockAlignment {
    double offset_s = 0;  // this rank's clock minus rank 0's
    double error_s = 0;  // the bound on that offset's error
    double epoch_s = 0;  // a whole second of rank 0's clock near the set-up, the same on every rank: the
        // trace's zero (its microseconds as doubles keep their precision)
    bool measured = false;
};

// allgather(send, recv, bytes): the communicator's set-up allgather (true on success).
ClockAlignment align_clock(int rank, int size, const std::function<bool(const void *, void *, size_t)> &allgather);

}  // namespace gpurdma::obs
