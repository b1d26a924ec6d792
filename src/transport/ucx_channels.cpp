#include "transport/ucx_channels.h"

#include <algorithm>
#include <stdexcept>

namespace gpurdma::transport {

UcxChannels::UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots,
                         size_t slot_size)
    : SlotChannels(rank, size, peers, slots, slot_size), context_(context)
{
    region_ = std::make_unique<RegisteredRegion>(context.context(), layout_.bytes());
    attach_region(region_->base());
    remotes_.resize(links_.size());
    for (auto &r : remotes_) r.flag_values.assign(static_cast<size_t>(slots), 0);
}

UcxChannels::~UcxChannels()
{
    // Requests still referencing our words must finish before they go.
    for (auto &p : pending_) context_.wait(p.request, 1.0);
    pending_.clear();
    remotes_.clear();  // keys before endpoints, both before our region
}

UcxPeerInfo UcxChannels::local_info() const
{
    UcxPeerInfo info;
    info.worker_address = context_.address();
    info.region_base = reinterpret_cast<uint64_t>(region_->base());
    info.region_key = region_->packed_key();
    return info;
}

void UcxChannels::connect(const std::vector<UcxPeerInfo> &peers, const std::vector<std::string> &hosts)
{
    for (size_t i = 0; i < links_.size(); ++i) {
        const int r = links_[i].rank;
        const UcxPeerInfo &info = peers.at(static_cast<size_t>(r));
        const std::string who = "rank " + std::to_string(r) + " (" + hosts.at(static_cast<size_t>(r)) + ")";
        std::string why;
        remotes_[i].ep = context_.endpoint(info.worker_address, &why);
        if (!remotes_[i].ep) throw std::runtime_error("connect to " + who + ": " + why);
        try {
            remotes_[i].region = std::make_unique<RemoteRegion>(remotes_[i].ep->get(), info.region_base,
                                                                info.region_key);
        } catch (const std::exception &e) {
            throw std::runtime_error("remote key of " + who + ": " + e.what());
        }
    }
}

UcxChannels::Remote &UcxChannels::remote_of(const Link &l)
{
    // links_ and remotes_ are parallel: the link's position is its index.
    return remotes_[static_cast<size_t>(&l - links_.data())];
}

bool UcxChannels::put(const Link &l, const void *src, size_t bytes, size_t remote_offset, bool user_source)
{
    const Remote &rm = remote_of(l);
    ucp_request_param_t param{};
    const ucs_status_ptr_t req =
        ucp_put_nbx(rm.ep->get(), src, bytes, rm.region->base() + remote_offset, rm.region->key(), &param);
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

Poll UcxChannels::deliver(Link &l, int slot, const void *src, size_t bytes, uint64_t flag)
{
    if (bytes > 0 && !put(l, src, bytes, l.remote.data_offset(l.index_there, slot), true)) return Poll::Failed;
    // The flag must not become visible before the data it announces.
    const ucs_status_t st = ucp_worker_fence(context_.worker());
    if (st != UCS_OK) {
        error_ = "fence toward rank " + std::to_string(l.rank) + ": " + ucs_status_string(st);
        return Poll::Failed;
    }
    Remote &rm = remote_of(l);
    rm.flag_values[static_cast<size_t>(slot)] = flag;
    if (!put(l, &rm.flag_values[static_cast<size_t>(slot)], sizeof(uint64_t),
             l.remote.flag_offset(l.index_there, slot), false))
        return Poll::Failed;
    return Poll::Done;
}

void UcxChannels::return_credit(Link &l, uint64_t consumed)
{
    // Monotone counter: a newer value overtaking an older put is harmless.
    Remote &rm = remote_of(l);
    rm.credit_value = consumed;
    put(l, &rm.credit_value, sizeof(uint64_t), l.remote.credit_offset(l.index_there), false);
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
    // Every put, flags and credits included, completes before the call returns: a
    // request left pending past the call could only be cancelled later, and a
    // cancelled put can leave the (shared, long-lived) endpoint unusable.
    if (pending_.empty()) return false;
    reap();
    return !pending_.empty();
}

}  // namespace gpurdma::transport
