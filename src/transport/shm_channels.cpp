#include "transport/shm_channels.h"

#include <algorithm>
#include <cstring>

namespace gpurdma::transport {

namespace {

std::vector<int> others(const std::vector<int> &members, int rank)
{
    std::vector<int> v;
    for (int m : members)
        if (m != rank) v.push_back(m);
    return v;
}

}  // namespace

size_t ShmChannels::region_stride(int local_ranks, int slots, size_t slot_size)
{
    ChannelLayout l;
    l.neighbors = local_ranks - 1;
    l.slots = slots;
    l.slot_size = slot_size;
    return ChannelLayout::round_up(l.bytes(), 4096);
}

size_t ShmChannels::segment_bytes(int local_ranks, int slots, size_t slot_size)
{
    return static_cast<size_t>(local_ranks) * region_stride(local_ranks, slots, slot_size);
}

ShmChannels::ShmChannels(int rank, int size, const std::vector<int> &node_members, int slots, size_t slot_size,
                         char *base)
    : SlotChannels(
          rank, size, [&node_members](int r) { return others(node_members, r); }, slots, slot_size),
      members_(node_members),
      stride_(region_stride(static_cast<int>(node_members.size()), slots, slot_size)),
      segment_base_(base)
{
    attach_region(region_of(rank));
}

Status ShmChannels::create(int rank, int size, const std::vector<int> &node_members, int slots, size_t slot_size,
                           char *base, size_t bytes, std::unique_ptr<ShmChannels> *out)
{
    if (bytes < segment_bytes(static_cast<int>(node_members.size()), slots, slot_size))
        return Status::error(GPURDMA_ERR_NO_RESOURCE, "shared segment too small");
    out->reset(new ShmChannels(rank, size, node_members, slots, slot_size, base));
    return Status::ok();
}

std::vector<std::pair<size_t, size_t>> ShmChannels::cleared(int local_ranks, int slots, size_t slot_size)
{
    ChannelLayout l;
    l.neighbors = local_ranks - 1;
    l.slots = slots;
    l.slot_size = slot_size;
    std::vector<std::pair<size_t, size_t>> out;
    const size_t stride = region_stride(local_ranks, slots, slot_size);
    for (int r = 0; r < local_ranks; ++r) out.emplace_back(static_cast<size_t>(r) * stride, l.data_start());
    return out;
}

char *ShmChannels::region_of(int rank) const
{
    const auto at = std::lower_bound(members_.begin(), members_.end(), rank);
    return segment_base_ + static_cast<size_t>(at - members_.begin()) * stride_;
}

Poll ShmChannels::deliver(Link &l, int slot, const void *src, size_t bytes, uint64_t flag, Reader)
{
    char *peer = region_of(l.rank);
    std::memcpy(peer + l.remote.data_offset(l.index_there, slot), src, bytes);
    __atomic_store_n(reinterpret_cast<uint64_t *>(peer + l.remote.flag_offset(l.index_there, slot)), flag,
                     __ATOMIC_RELEASE);
    return Poll::Done;
}

void ShmChannels::return_credit(Link &l, uint64_t consumed)
{
    __atomic_store_n(reinterpret_cast<uint64_t *>(region_of(l.rank) + l.remote.credit_offset(l.index_there)), consumed,
                     __ATOMIC_RELEASE);
}

}  // namespace gpurdma::transport
