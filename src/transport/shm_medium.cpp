#include "transport/shm_medium.h"

#include <string>
#include <utility>

namespace gpurdma::transport {

ShmMedium::ShmMedium(int rank, int size, std::vector<int> node_members, Request request, ShmArenas *arenas)
    : rank_(rank), size_(size), members_(std::move(node_members)), request_(std::move(request)), arenas_(arenas)
{}

Status ShmMedium::setup(wire::Writer &record)
{
    if (members_.size() < 2 || members_[0] != rank_) {
        record.u32(None);
        return Status::ok();
    }
    Status made;
    if (arenas_ && arenas_->enabled()) {
        SliceAddress where;
        made = arenas_->take(request_.bytes, static_cast<int>(members_.size()), request_.cleared, &slice_, &where);
        record.u32(slice_ ? Arena : None);
        if (slice_) {
            where.write(record);
            memory_ = NodeMemory{slice_->base(), slice_->bytes(), slice_->name()};
        }
        return made;
    }
    made = ShmSegment::create(request_.bytes, &segment_);
    record.u32(segment_ ? Segment : None);
    if (segment_) {
        record.str(segment_->name());
        memory_ = NodeMemory{segment_->base(), segment_->bytes(), segment_->name()};
    }
    return made;
}

Status ShmMedium::map_memory(wire::Reader &leader)
{
    uint32_t source = None;
    if (!leader.u32(&source)) return Status::unsupported("an unreadable set-up record");
    if (source == Arena) {
        SliceAddress where;
        if (!where.read(leader) || where.bytes != request_.bytes)
            return Status::unsupported("an unreadable set-up record");
        if (!arenas_) return Status::unsupported("no shared-memory arena support on this rank");
        const Status attached = arenas_->attach(where, &slice_);
        if (attached.is_ok()) memory_ = NodeMemory{slice_->base(), slice_->bytes(), slice_->name()};
        return attached;
    }
    if (source == Segment) {
        std::string name;
        if (!leader.str(&name)) return Status::unsupported("an unreadable set-up record");
        const Status attached = ShmSegment::attach(name, request_.bytes, &segment_);
        if (attached.is_ok()) memory_ = NodeMemory{segment_->base(), segment_->bytes(), segment_->name()};
        return attached;
    }
    return Status::unsupported("no shared memory from the node's first rank");
}

Status ShmMedium::connect(std::vector<wire::Reader> &records)
{
    // Every record has our part (read in order by every medium): consume each.
    for (size_t r = 0; r < records.size(); ++r) {
        if (members_.size() >= 2 && static_cast<int>(r) == members_[0] && members_[0] != rank_) {
            const Status mapped = map_memory(records[r]);
            if (!mapped.is_ok()) return mapped.prefixed("rank " + std::to_string(r) + "'s node memory: ");
            continue;
        }
        uint32_t source = None;
        bool readable = records[r].u32(&source);
        if (readable && source == Arena) {
            SliceAddress skip;
            readable = skip.read(records[r]);
        } else if (readable && source == Segment) {
            std::string skip;
            readable = records[r].str(&skip);
        }
        if (!readable) return Status::unsupported("rank " + std::to_string(r) + " sent an unreadable set-up record");
    }
    if (members_.size() < 2) return Status::ok();
    if (!memory_.base) return Status::unsupported("no shared memory for the node");
    if (!request_.slot_channels) return Status::ok();
    return ShmChannels::create(rank_, size_, members_, request_.slots, request_.slot_size, memory_.base, memory_.bytes,
                               &channels_);
}

void ShmMedium::connected()
{
    if (segment_) segment_->unlink();
}

}  // namespace gpurdma::transport
