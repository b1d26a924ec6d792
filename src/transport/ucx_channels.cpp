#include "transport/ucx_channels.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "plan/neighbors.h"

namespace gpurdma::transport {

UcxChannels::UcxChannels(UcxContext &context, int rank, int size, int slots, size_t slot_size)
    : context_(context), rank_(rank), size_(size)
{
    neighbor_ranks_ = plan::neighbors(size, rank);
    layout_.neighbors = static_cast<int>(neighbor_ranks_.size());
    layout_.slots = slots;
    layout_.slot_size = slot_size;
    region_ = std::make_unique<RegisteredRegion>(context.context(), layout_.bytes());
    link_of_rank_.assign(static_cast<size_t>(size), -1);
    links_.resize(neighbor_ranks_.size());
    for (size_t i = 0; i < neighbor_ranks_.size(); ++i) {
        link_of_rank_[neighbor_ranks_[i]] = static_cast<int>(i);
        links_[i].rank = neighbor_ranks_[i];
        links_[i].flag_values.assign(static_cast<size_t>(slots), 0);
    }
}

UcxChannels::~UcxChannels()
{
    // Requests still referencing our buffers must finish before the region goes.
    for (auto &p : pending_) {
        context_.wait(p.request, 1.0);
    }
    pending_.clear();
    links_.clear();  // remote keys before endpoints, both before our region
}

PeerInfo UcxChannels::local_info(const std::string &host) const
{
    PeerInfo info;
    info.worker_address = context_.address();
    info.region_base = reinterpret_cast<uint64_t>(region_->base());
    info.region_key = region_->packed_key();
    info.host = host;
    return info;
}

void UcxChannels::connect(const std::vector<PeerInfo> &peers)
{
    for (auto &l : links_) {
        const PeerInfo &info = peers.at(static_cast<size_t>(l.rank));
        const std::vector<int> theirs = plan::neighbors(size_, l.rank);
        const auto at = std::find(theirs.begin(), theirs.end(), rank_);
        if (at == theirs.end()) throw std::logic_error("neighbor relation is not symmetric");
        l.index_there = static_cast<int>(at - theirs.begin());
        l.remote_layout = layout_;
        l.remote_layout.neighbors = static_cast<int>(theirs.size());
        std::string why;
        l.ep = context_.endpoint(info.worker_address, &why);
        if (!l.ep)
            throw std::runtime_error("connect to rank " + std::to_string(l.rank) + " (" + info.host +
                                     "): " + why);
        try {
            l.region = std::make_unique<RemoteRegion>(l.ep->get(), info.region_base, info.region_key);
        } catch (const std::exception &e) {
            throw std::runtime_error("remote key of rank " + std::to_string(l.rank) + " (" +
                                     info.host + "): " + e.what());
        }
    }
}

UcxChannels::Link *UcxChannels::link(int peer)
{
    if (peer < 0 || peer >= size_ || link_of_rank_[peer] < 0) return nullptr;
    return &links_[static_cast<size_t>(link_of_rank_[peer])];
}

uint64_t UcxChannels::load(size_t offset) const
{
    return __atomic_load_n(reinterpret_cast<const uint64_t *>(region_->base() + offset),
                           __ATOMIC_ACQUIRE);
}

bool UcxChannels::put(Link &l, const void *src, size_t bytes, size_t remote_offset, bool user_source)
{
    ucp_request_param_t param{};
    const ucs_status_ptr_t req = ucp_put_nbx(l.ep->get(), src, bytes, l.region->base() + remote_offset,
                                             l.region->key(), &param);
    if (UCS_PTR_IS_ERR(req)) {
        error_ = "put of " + std::to_string(bytes) + " bytes to rank " + std::to_string(l.rank) + ": " +
                 ucs_status_string(UCS_PTR_STATUS(req));
        return false;
    }
    if (req != nullptr) {
        const char *lo = static_cast<const char *>(src);
        pending_.push_back(Pending{req, user_source ? lo : nullptr, user_source ? lo + bytes : nullptr, l.rank});
    }
    return true;
}

Poll UcxChannels::try_send(int peer, const void *src, size_t bytes)
{
    Link *l = link(peer);
    if (!l) {
        error_ = "no channel to rank " + std::to_string(peer);
        return Poll::Failed;
    }
    if (bytes > layout_.slot_size) {
        error_ = "message of " + std::to_string(bytes) + " bytes exceeds the landing slot";
        return Poll::Failed;
    }
    const uint64_t consumed = load(layout_.credit_offset(link_of_rank_[peer]));
    if (l->sent - consumed >= static_cast<uint64_t>(layout_.slots)) return Poll::WouldBlock;
    const int slot = static_cast<int>(l->sent % static_cast<uint64_t>(layout_.slots));
    if (bytes > 0 && !put(*l, src, bytes, l->remote_layout.data_offset(l->index_there, slot), true))
        return Poll::Failed;
    // The flag must not become visible before the data it announces.
    const ucs_status_t st = ucp_worker_fence(context_.worker());
    if (st != UCS_OK) {
        error_ = std::string("fence toward rank ") + std::to_string(peer) + ": " + ucs_status_string(st);
        return Poll::Failed;
    }
    l->flag_values[slot] = l->sent + 1;
    if (!put(*l, &l->flag_values[slot], sizeof(uint64_t), l->remote_layout.flag_offset(l->index_there, slot),
             false))
        return Poll::Failed;
    ++l->sent;
    bytes_put_ += bytes;
    return Poll::Done;
}

const void *UcxChannels::try_receive(int peer, size_t bytes)
{
    Link *l = link(peer);
    if (!l || bytes > layout_.slot_size) return nullptr;
    const int index = link_of_rank_[peer];
    const int slot = static_cast<int>(l->received % static_cast<uint64_t>(layout_.slots));
    if (load(layout_.flag_offset(index, slot)) != l->received + 1) return nullptr;
    return region_->base() + layout_.data_offset(index, slot);
}

void UcxChannels::release(int peer)
{
    Link *l = link(peer);
    if (!l) return;
    ++l->received;
    // Monotone counter: a newer value overtaking an older put is harmless.
    l->credit_value = l->received;
    put(*l, &l->credit_value, sizeof(uint64_t), l->remote_layout.credit_offset(l->index_there), false);
}

void UcxChannels::reap()
{
    auto done = [this](Pending &p) {
        const ucs_status_t st = ucp_request_check_status(p.request);
        if (st == UCS_INPROGRESS) return false;
        if (st != UCS_OK && error_.empty())
            error_ = "put to rank " + std::to_string(p.peer) + " failed: " + ucs_status_string(st);
        ucp_request_free(p.request);
        return true;
    };
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

bool UcxChannels::source_busy(const void *ptr, size_t bytes)
{
    if (pending_.empty()) return false;
    reap();
    const char *lo = static_cast<const char *>(ptr);
    const char *hi = lo + bytes;
    for (const auto &p : pending_)
        if (p.lo && p.lo < hi && lo < p.hi) return true;
    return false;
}

bool UcxChannels::sends_pending()
{
    if (pending_.empty()) return false;
    reap();
    return !pending_.empty();
}

bool UcxChannels::drain(double timeout_s)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < links_.size(); ++i)
            if (load(layout_.credit_offset(static_cast<int>(i))) != links_[i].sent) all = false;
        if (all && !sends_pending()) return true;
        if (std::chrono::steady_clock::now() > deadline) return false;
        if (context_.progress() == 0) std::this_thread::yield();
    }
}

}  // namespace gpurdma::transport
