#include "transport/ucx_medium.h"

#include <utility>

namespace gpurdma::transport {

namespace {

void write_info(wire::Writer &record, const UcxPeerInfo &info)
{
    record.str(info.worker_address);
    record.u64(info.region_base);
    record.u64(info.channel_id);
    record.u64(info.key_region);
    record.str(info.region_key);
}

bool read_info(wire::Reader &record, UcxPeerInfo *info)
{
    return record.str(&info->worker_address) && record.u64(&info->region_base) && record.u64(&info->channel_id) &&
           record.u64(&info->key_region) && record.str(&info->region_key);
}

}  // namespace

UcxMedium::UcxMedium(int rank, int size, PeerListFn peers, int slots, size_t slot_size, int lanes, UcxStarter start,
                     std::vector<std::string> hosts)
    : rank_(rank),
      size_(size),
      peers_(std::move(peers)),
      slots_(slots),
      slot_size_(slot_size),
      lanes_(lanes),
      start_(std::move(start)),
      hosts_(std::move(hosts))
{}

Status UcxMedium::setup(wire::Writer &record)
{
    Status made;
    if (!peers_(rank_).empty()) {
        std::string why;
        context_ = start_(&why);
        if (!context_) made = Status::unsupported(why);
        else made = UcxChannels::create(*context_, rank_, size_, peers_, slots_, slot_size_, lanes_, &channels_);
    }
    write_info(record, channels_ ? channels_->local_info() : UcxPeerInfo{});
    return made;
}

Status UcxMedium::connect(std::vector<wire::Reader> &records)
{
    std::vector<UcxPeerInfo> info(records.size());
    for (size_t r = 0; r < records.size(); ++r)
        if (!read_info(records[r], &info[r]))
            return Status::unsupported("rank " + std::to_string(r) + " sent an unreadable set-up record");
    return channels_ ? channels_->connect(info, hosts_) : Status::ok();
}

}  // namespace gpurdma::transport
