// Which buffers each rank of a node passes to each call, host or GPU memory: one
// cache line per rank of the node at the end of the node's shared segment. Every rank
// posts (call number << 1 | device) as it begins a call, a single store into a line
// only it writes. A rank with GPU buffers reads its node peers' lines before it picks
// the device path: if one peer passes host memory (and so runs the host path for this
// call without waiting for anyone), every GPU rank of the node stages the call through
// host memory and joins it there. Host-buffer calls never read the board, so they cost
// one store. Call numbers are the communicator's, counted alike on every rank.
// Allreduce needs every rank's input, so a peer can never have begun a later call
// before this rank has decided the current one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpurdma::algo {

class CallKinds {
public:
    static constexpr size_t kLine = 64;
    static size_t bytes(int ranks) { return static_cast<size_t>(ranks) * kLine; }

    enum class Kind { NotYet, Host, Device, Later };

    // `base`: the board (bytes(ranks) of zeroed shared memory); `me`: this rank's index
    // among the node's ranks.
    CallKinds(char *base, int me) : base_(base), me_(me) {}

    void post(uint64_t call, bool device) const
    {
        __atomic_store_n(word(me_), call << 1 | (device ? 1 : 0), __ATOMIC_RELEASE);
    }

    // What node peer `index` posted for `call` (Later: it has begun a later call).
    Kind peer(int index, uint64_t call) const
    {
        const uint64_t v = __atomic_load_n(word(index), __ATOMIC_ACQUIRE);
        if ((v >> 1) < call) return Kind::NotYet;
        if ((v >> 1) > call) return Kind::Later;
        return (v & 1) ? Kind::Device : Kind::Host;
    }

private:
    uint64_t *word(int index) const { return reinterpret_cast<uint64_t *>(base_ + static_cast<size_t>(index) * kLine); }

    char *base_;
    int me_;
};

}  // namespace gpurdma::algo
