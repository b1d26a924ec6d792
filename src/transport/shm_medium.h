// The node's shared segment as a medium: the node's first rank creates it with the
// bytes the chosen algorithm asks for (slot channels for schedules, or an algorithm's
// own layout such as the node arena), the others attach by the name in its set-up
// record, and the name goes once every rank is connected.
#pragma once

#include <memory>
#include <vector>

#include "transport/medium.h"
#include "transport/shm_channels.h"
#include "transport/shm_segment.h"

namespace gpurdma::transport {

class ShmMedium : public Medium {
public:
    // What the chosen algorithm needs from the segment.
    struct Request {
        size_t bytes = 0;  // the segment's size
        bool slot_channels = false;  // lay ShmChannels over it (schedules)
        int slots = 1;
        size_t slot_size = 0;
    };

    // node_members: this rank's node, ascending. With one member the medium is idle.
    ShmMedium(int rank, int size, std::vector<int> node_members, Request request);

    const char *name() const override { return "shared memory"; }
    Status setup(wire::Writer &record) override;
    Status connect(std::vector<wire::Reader> &records) override;
    void connected() override;

    // After connect: the node's segment (null if the node has one rank) and the
    // channels over it (null unless asked for).
    ShmSegment *segment() const { return segment_.get(); }
    ShmChannels *channels() const { return channels_.get(); }

private:
    int rank_;
    int size_;
    std::vector<int> members_;
    Request request_;
    // Declared in release order: the channels go before the segment they use.
    std::unique_ptr<ShmSegment> segment_;
    std::unique_ptr<ShmChannels> channels_;
};

}  // namespace gpurdma::transport
