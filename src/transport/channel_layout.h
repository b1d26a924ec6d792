// Layout of a rank's landing region: for each neighbor (in plan::neighbors order)
// a control block of `slots` arrival flags and one credit word, then the data slots.
// A sender computes the receiver's layout from (receiver's neighbor count, its own
// index there), so no per-channel addresses are exchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpurdma::transport {

struct ChannelLayout {
    int neighbors = 0;
    int slots = 1;
    size_t slot_size = 0;

    static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
    // Flags and credit of one neighbor on their own cache lines: writers differ.
    size_t control_stride() const { return round_up(static_cast<size_t>(slots + 1) * 8, 64); }
    size_t data_start() const { return round_up(static_cast<size_t>(neighbors) * control_stride(), 4096); }

    // Written by the neighbor: sequence number + 1 of the message in `slot`.
    size_t flag_offset(int index, int slot) const
    {
        return static_cast<size_t>(index) * control_stride() + static_cast<size_t>(slot) * 8;
    }
    // Written by the neighbor: how many of our messages to it it has consumed.
    size_t credit_offset(int index) const
    {
        return static_cast<size_t>(index) * control_stride() + static_cast<size_t>(slots) * 8;
    }
    size_t data_offset(int index, int slot) const
    {
        return data_start() + (static_cast<size_t>(index) * slots + slot) * slot_size;
    }
    size_t bytes() const { return data_start() + static_cast<size_t>(neighbors) * slots * slot_size; }
};

}  // namespace gpurdma::transport
