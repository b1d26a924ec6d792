// UCX slot channels as a medium: setup() starts the process's UCX context on demand
// and registers this rank's landing region, its record carries the worker address,
// region and key; connect() reaches every peer this rank exchanges messages with.
// Idle (an empty record, nothing started) when the rank has no such peer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/medium.h"
#include "transport/ucx_channels.h"
#include "transport/ucx_context.h"

namespace gpurdma::transport {

// Starts (or returns) the process's UCX context; null with *why if it cannot.
using UcxStarter = std::function<UcxContext *(std::string *why)>;

class UcxMedium : public Medium {
public:
    // peers: the ranks each rank reaches through UCX (symmetric); hosts name them in errors;
    // lanes: endpoints per peer (transport/ucx_channels.h).
    UcxMedium(int rank, int size, PeerListFn peers, int slots, size_t slot_size, int lanes, UcxStarter start,
              std::vector<std::string> hosts);

    const char *name() const override { return "UCX"; }
    Status setup(wire::Writer &record) override;
    Status connect(std::vector<wire::Reader> &records) override;

    // Null while idle.
    UcxChannels *channels() const { return channels_.get(); }
    UcxContext *context() const { return context_; }

private:
    int rank_;
    int size_;
    PeerListFn peers_;
    int slots_;
    size_t slot_size_;
    int lanes_;
    UcxStarter start_;
    std::vector<std::string> hosts_;
    UcxContext *context_ = nullptr;
    std::unique_ptr<UcxChannels> channels_;
};

}  // namespace gpurdma::transport
