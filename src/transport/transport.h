// What the executor needs from a transport: ordered, credit-limited message
// channels to the peers of a schedule. Every call is non-blocking; the caller
// drives progress and decides how long to wait.
#pragma once

#include <cstddef>

#include "gpurdma/gpurdma.h"

namespace gpurdma::transport {

enum class Poll { Done, WouldBlock, Failed };

// A span of this process's memory (where arrivals land, say).
struct MemoryRange {
    const char *base = nullptr;
    size_t bytes = 0;
    bool contains(const void *p, size_t n) const
    {
        const char *c = static_cast<const char *>(p);
        return base && c >= base && n <= bytes && static_cast<size_t>(c - base) <= bytes - n;
    }
};

// Who reads a message at its receiver: the CPU, or the GPU (a rail reducing on it),
// which can also read GPU memory the receiver offered for arrivals (GPUDirect RDMA).
// A sender passes its own reader: in one call every rank's is the same, bar the odd
// mixed call, which the receiver handles (a CPU reader of a message that landed in GPU
// memory gets a copy).
enum class Reader { Cpu, Gpu };

class PeerTransport {
public:
    virtual ~PeerTransport() = default;

    // Starts writing bytes from src into peer's next landing slot. WouldBlock when
    // all slots toward peer are still unconsumed. src must stay unchanged until
    // source_busy() no longer reports it. receiver: who is expected to read it there.
    virtual Poll try_send(int peer, const void *src, size_t bytes, Reader receiver) = 0;

    // The next message from peer if it has fully arrived, else nullptr; in memory
    // `reader` can read.
    virtual const void *try_receive(int peer, size_t bytes, Reader reader) = 0;

    // The message last returned by try_receive(peer) is consumed: the slot goes back
    // to the sender.
    virtual void release(int peer) = 0;

    // Whether an unfinished send still reads from [ptr, ptr + bytes).
    virtual bool source_busy(const void *ptr, size_t bytes) = 0;

    // Whether any send has not yet finished reading its source.
    virtual bool sends_pending() = 0;

    // Whether a transfer has failed (the error says which and why).
    virtual bool failed() const = 0;

    // Text of the last Failed result.
    virtual const char *error() const = 0;
};

}  // namespace gpurdma::transport
