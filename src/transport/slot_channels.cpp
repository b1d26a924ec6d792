#include "transport/slot_channels.h"

#include <algorithm>

namespace gpurdma::transport {

SlotChannels::SlotChannels(int rank, int size, const PeerListFn &peers, int slots, size_t slot_size)
    : rank_(rank), size_(size), peer_ranks_(peers(rank))
{
    layout_.neighbors = static_cast<int>(peer_ranks_.size());
    layout_.slots = slots;
    layout_.slot_size = slot_size;
    links_.resize(peer_ranks_.size());
    for (size_t i = 0; i < peer_ranks_.size(); ++i) {
        Link &l = links_[i];
        l.rank = peer_ranks_[i];
        const std::vector<int> theirs = peers(l.rank);
        // The relation is symmetric (node members; UcxChannels::create checks it): we are in their list.
        l.index_there = static_cast<int>(std::lower_bound(theirs.begin(), theirs.end(), rank) - theirs.begin());
        l.remote = layout_;
        l.remote.neighbors = static_cast<int>(theirs.size());
    }
}

Status SlotChannels::symmetric(int rank, const PeerListFn &peers)
{
    for (int p : peers(rank)) {
        const std::vector<int> theirs = peers(p);
        if (!std::binary_search(theirs.begin(), theirs.end(), rank))
            return Status::error(GPURDMA_ERR_TRANSPORT, "peer relation is not symmetric: rank " + std::to_string(p) +
                                                            " does not list rank " + std::to_string(rank));
    }
    return Status::ok();
}

int SlotChannels::link_index(int peer) const
{
    const auto at = std::lower_bound(peer_ranks_.begin(), peer_ranks_.end(), peer);
    return (at != peer_ranks_.end() && *at == peer) ? static_cast<int>(at - peer_ranks_.begin()) : -1;
}

uint64_t SlotChannels::load(size_t offset) const
{
    return __atomic_load_n(reinterpret_cast<const uint64_t *>(base_ + offset), __ATOMIC_ACQUIRE);
}

void SlotChannels::store(size_t offset, uint64_t value)
{
    __atomic_store_n(reinterpret_cast<uint64_t *>(base_ + offset), value, __ATOMIC_RELEASE);
}

void SlotChannels::attach_offered(char *base, OfferedToHost to_host)
{
    offered_.base = base;
    offered_.to_host = std::move(to_host);
    offered_.copies.clear();
    offered_.copies.resize(links_.size());
}

Poll SlotChannels::try_send(int peer, const void *src, size_t bytes, Reader receiver)
{
    const int i = link_index(peer);
    if (i < 0) {
        error_ = "no channel to rank " + std::to_string(peer);
        return Poll::Failed;
    }
    if (bytes > layout_.slot_size) {
        error_ = "message of " + std::to_string(bytes) + " bytes exceeds the landing slot";
        return Poll::Failed;
    }
    poll_sends();
    Link &l = links_[static_cast<size_t>(i)];
    const uint64_t consumed = load(layout_.credit_offset(i));
    if (l.sent - consumed >= static_cast<uint64_t>(layout_.slots)) return Poll::WouldBlock;
    const int slot = static_cast<int>(l.sent % static_cast<uint64_t>(layout_.slots));
    const Poll p = deliver(l, slot, src, bytes, l.sent + 1, receiver);
    if (p != Poll::Done) return p;
    ++l.sent;
    bytes_sent_ += bytes;
    return Poll::Done;
}

const void *SlotChannels::try_receive(int peer, size_t bytes, Reader reader)
{
    const int i = link_index(peer);
    if (i < 0 || bytes > layout_.slot_size) return nullptr;
    poll_sends();
    const Link &l = links_[static_cast<size_t>(i)];
    const int slot = static_cast<int>(l.received % static_cast<uint64_t>(layout_.slots));
    const uint64_t flag = load(layout_.flag_offset(i, slot));
    if ((flag & ~kLandedOffered) != l.received + 1) return nullptr;
    if (flag & kLandedOffered) return offered_arrival(static_cast<size_t>(i), slot, bytes, reader);
    return base_ + layout_.data_offset(i, slot);
}

const void *SlotChannels::offered_arrival(size_t link, int slot, size_t bytes, Reader reader)
{
    const std::string from = " from rank " + std::to_string(links_[link].rank);
    if (!offered_.base) {
        if (error_.empty()) error_ = "a message" + from + " landed in offered memory that was withdrawn";
        return nullptr;
    }
    const char *at = offered_.base + layout_.data_offset(static_cast<int>(link), slot) - layout_.data_start();
    ++offered_arrivals_;
    if (reader == Reader::Gpu) return at;
    // The odd mixed call: this rank's CPU reads what a GPU-reading peer sent.
    auto &copy = offered_.copies[link];
    if (!copy) copy.reset(new char[layout_.slot_size]);
    std::string why;
    if (!offered_.to_host || !offered_.to_host(copy.get(), at, bytes, &why)) {
        if (error_.empty()) error_ = "copying a message" + from + " out of GPU memory: " + why;
        return nullptr;
    }
    ++offered_copies_;
    return copy.get();
}

void SlotChannels::release(int peer)
{
    const int i = link_index(peer);
    if (i < 0) return;
    Link &l = links_[static_cast<size_t>(i)];
    ++l.received;
    return_credit(l, l.received);
}

uint64_t SlotChannels::slots_held() const
{
    uint64_t held = 0;
    for (size_t i = 0; i < links_.size(); ++i)
        held += links_[i].sent - load(layout_.credit_offset(static_cast<int>(i)));
    return held;
}

std::vector<int> SlotChannels::peers_holding_slots() const
{
    std::vector<int> holding;
    for (size_t i = 0; i < links_.size(); ++i)
        if (load(layout_.credit_offset(static_cast<int>(i))) != links_[i].sent) holding.push_back(links_[i].rank);
    return holding;
}

bool SlotChannels::drained()
{
    poll_sends();  // a flag waiting for its flush holds back the peer's credit
    if (slots_held() == 0 && !sends_pending()) return true;
    progress();
    return false;
}

}  // namespace gpurdma::transport
