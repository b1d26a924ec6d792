// A medium sets itself up behind one small contract (NCCL's transports have the same
// shape: canConnect / setup / connect / free): the communicator's set-up creates the
// media it needs (has_peers), lets each write its part of this rank's set-up record,
// hands each every rank's part, and after the vote tells it everyone is connected.
// Releasing it (the destructor) frees what it took; its owner first lets peers finish
// writing into memory that is about to go (the channels' drained(), under its wait loop).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "setup/agreement.h"
#include "setup/wire.h"

namespace gpurdma::transport {

class Medium {
public:
    virtual ~Medium() = default;
    virtual const char *name() const = 0;  // "shared memory", "UCX"

    // Local resources (segment, registered region, worker); appends what peers need
    // to reach this rank to `record`. A failure still lets the set-up go on to the
    // vote, so every rank declines together.
    virtual Status setup(wire::Writer &record) = 0;

    // records[r] is positioned at rank r's part of its record (every medium reads its
    // part in the order they were set up). Connects to the peers this rank talks to.
    virtual Status connect(std::vector<wire::Reader> &records) = 0;

    // Every rank connected (after the vote): names that let peers find us may go.
    virtual void connected() {}
};

// Rounds 2 and 3 of a set-up over these media: each writes its part of this rank's
// record, one exchange, each connects from everyone's parts (only if every rank could
// set up), the vote (a refusing rank's reason reaches every rank, named through
// hosts), then connected(). Not ok: every rank got the same verdict.
Status connect_media(setup::Agreement &agreement, const std::vector<Medium *> &media,
                     const std::vector<std::string> &hosts);

}  // namespace gpurdma::transport
