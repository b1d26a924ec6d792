#include "transport/shm_medium.h"

#include <string>
#include <utility>

namespace gpurdma::transport {

ShmMedium::ShmMedium(int rank, int size, std::vector<int> node_members, Request request)
    : rank_(rank), size_(size), members_(std::move(node_members)), request_(request)
{}

Status ShmMedium::setup(wire::Writer &record)
{
    Status created;
    if (members_.size() > 1 && members_[0] == rank_) created = ShmSegment::create(request_.bytes, &segment_);
    record.str(segment_ ? segment_->name() : std::string());
    return created;
}

Status ShmMedium::connect(std::vector<wire::Reader> &records)
{
    std::vector<std::string> names(records.size());
    for (size_t r = 0; r < records.size(); ++r)
        if (!records[r].str(&names[r]))
            return Status::unsupported("rank " + std::to_string(r) + " sent an unreadable set-up record");
    if (members_.size() < 2) return Status::ok();
    if (!segment_) {
        const Status attached = ShmSegment::attach(names[static_cast<size_t>(members_[0])], request_.bytes, &segment_);
        if (!attached.is_ok()) return attached;
    }
    if (!request_.slot_channels) return Status::ok();
    return ShmChannels::create(rank_, size_, members_, request_.slots, request_.slot_size, *segment_, &channels_);
}

void ShmMedium::connected()
{
    if (segment_) segment_->unlink();
}

}  // namespace gpurdma::transport
