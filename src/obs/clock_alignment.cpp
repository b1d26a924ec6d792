#include "obs/clock_alignment.h"

#include <cmath>
#include <vector>

#include "obs/ticks.h"

namespace gpurdma::obs {

ClockAlignment align_clock(int rank, int size, const std::function<bool(const void *, void *, size_t)> &allgather)
{
    ClockAlignment best;
    if (size < 2) {
        best.measured = true;
        return best;
    }
    std::vector<double> left(static_cast<size_t>(size) * 2);
    for (int round = 0; round < 3; ++round) {
        const char token = 0;
        std::vector<char> tokens(static_cast<size_t>(size));
        const double entered = TickClock::unix_now();
        if (!allgather(&token, tokens.data(), 1)) return best;
        const double t = TickClock::unix_now();
        // This rank's leave time and how long its allgather took (the window it left in).
        const double mine[2] = {t, t - entered};
        if (!allgather(mine, left.data(), sizeof mine)) return best;
        // Rank 0 left within its own window; the last rank to enter left after entering.
        double window = 0;
        for (int r = 0; r < size; ++r) window = left[2 * r + 1] > window ? left[2 * r + 1] : window;
        const double offset = t - left[0];
        if (!best.measured || window < best.error_s) {
            best.offset_s = offset;
            best.error_s = window;
            best.epoch_s = std::floor(left[0]);
            best.measured = true;
        }
    }
    (void)rank;
    return best;
}

}  // namespace gpurdma::obs
