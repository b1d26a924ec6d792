#include "transport/medium.h"

#include "base/text.h"

namespace gpurdma::transport {

Status connect_media(setup::Agreement &agreement, const std::vector<Medium *> &media,
                     const std::vector<std::string> &hosts)
{
    // A rank that failed still takes part (ok = 0) so that every rank reaches the
    // same verdict in the vote; its reason travels with its vote.
    wire::Writer parts;
    Status mine;
    for (Medium *m : media)
        if (mine.is_ok()) mine = m->setup(parts);
    wire::Writer w;
    w.u32(mine.is_ok() ? 1 : 0);
    w.str(mine.is_ok() ? parts.take() : std::string());
    std::vector<std::string> records;
    const Status exchanged = agreement.exchange(w.take(), &records);
    if (!exchanged.is_ok()) return exchanged;
    std::vector<std::string> media_parts(records.size());
    bool everyone = true;  // a rank that failed says why in the vote; the others only wait for it
    for (size_t r = 0; r < records.size() && mine.is_ok(); ++r) {
        wire::Reader rd(records[r]);
        uint32_t ok = 0;
        if (!rd.u32(&ok) || !rd.str(&media_parts[r]))
            mine = Status::unsupported(describe_rank(static_cast<int>(r), hosts) + " sent an unreadable set-up record");
        everyone = everyone && ok;
    }
    if (mine.is_ok() && everyone) {
        std::vector<wire::Reader> readers;
        for (const std::string &p : media_parts) readers.emplace_back(p);
        for (Medium *m : media)
            if (mine.is_ok()) mine = m->connect(readers);
    }
    // Only once all agree may, e.g., the node's segment name go away.
    const Status verdict = agreement.vote(mine, hosts);
    if (!verdict.is_ok()) return verdict;
    for (Medium *m : media) m->connected();
    return Status::ok();
}

}  // namespace gpurdma::transport
