// One PeerTransport over two media: peers on this node go through shared memory,
// the others through UCX. The schedule never knows which medium a step uses.
#pragma once

#include <string>
#include <vector>

#include "transport/transport.h"

namespace gpurdma::transport {

class Router : public PeerTransport {
public:
    // local[r] says whether rank r shares this node. Either medium may be null if no
    // peer needs it.
    Router(std::vector<bool> local, PeerTransport *shm, PeerTransport *net)
        : local_(std::move(local)), shm_(shm), net_(net)
    {}

    Poll try_send(int peer, const void *src, size_t bytes, Reader receiver) override
    {
        PeerTransport *t = route(peer);
        return t ? t->try_send(peer, src, bytes, receiver) : fail(peer);
    }
    const void *try_receive(int peer, size_t bytes, Reader reader) override
    {
        PeerTransport *t = route(peer);
        return t ? t->try_receive(peer, bytes, reader) : nullptr;
    }
    void release(int peer) override
    {
        if (PeerTransport *t = route(peer)) t->release(peer);
    }
    bool source_busy(const void *ptr, size_t bytes) override
    {
        return (shm_ && shm_->source_busy(ptr, bytes)) || (net_ && net_->source_busy(ptr, bytes));
    }
    bool sends_pending() override { return (shm_ && shm_->sends_pending()) || (net_ && net_->sends_pending()); }
    bool failed() const override { return !error_.empty() || (shm_ && shm_->failed()) || (net_ && net_->failed()); }
    const char *error() const override
    {
        if (!error_.empty()) return error_.c_str();
        if (shm_ && shm_->failed()) return shm_->error();
        if (net_ && net_->failed()) return net_->error();
        return "";
    }

private:
    PeerTransport *route(int peer) const
    {
        if (peer < 0 || static_cast<size_t>(peer) >= local_.size()) return nullptr;
        return local_[static_cast<size_t>(peer)] ? shm_ : net_;
    }
    Poll fail(int peer)
    {
        error_ = "no transport toward rank " + std::to_string(peer);
        return Poll::Failed;
    }

    std::vector<bool> local_;
    PeerTransport *shm_;
    PeerTransport *net_;
    std::string error_;
};

}  // namespace gpurdma::transport
