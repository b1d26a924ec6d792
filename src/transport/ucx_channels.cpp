#include "transport/ucx_channels.h"

#include <algorithm>
#include <cstring>

namespace gpurdma::transport {

UcxChannels::UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size)
    : SlotChannels(rank, size, peers, slots, slot_size), context_(context), channel_id_(context.new_channel_id())
{
    remotes_.resize(links_.size());
    for (auto &r : remotes_) {
        r.flag_values.assign(static_cast<size_t>(slots), 0);
        r.data_headers.assign(static_cast<size_t>(slots), AmHeader{});
    }
}

Status UcxChannels::create(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots,
                           size_t slot_size, std::unique_ptr<UcxChannels> *out)
{
    const Status symmetric_peers = symmetric(rank, peers);
    if (!symmetric_peers.is_ok()) return symmetric_peers;
    std::unique_ptr<UcxChannels> channels(new UcxChannels(context, rank, size, peers, slots, slot_size));
    const Status registered =
        RegisteredRegion::create(context.context(), channels->layout_.bytes(), &channels->region_);
    if (!registered.is_ok()) return registered;
    channels->attach_region(channels->region_->base());
    // Only a complete channel receives: a failed one never registers its sink.
    context.add_sink(channels->channel_id_, channels.get());
    *out = std::move(channels);
    return Status::ok();
}

UcxChannels::~UcxChannels()
{
    // Requests still referencing our words must finish before they go.
    context_.remove_sink(channel_id_);
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
    info.channel_id = channel_id_;
    return info;
}

Status UcxChannels::connect(const std::vector<UcxPeerInfo> &peers, const std::vector<std::string> &hosts)
{
    for (size_t i = 0; i < links_.size(); ++i) {
        const int r = links_[i].rank;
        const UcxPeerInfo &info = peers.at(static_cast<size_t>(r));
        const std::string who = "rank " + std::to_string(r) + " (" + hosts.at(static_cast<size_t>(r)) + ")";
        const Status reached = context_.endpoint(info.worker_address, &remotes_[i].ep);
        if (!reached.is_ok()) return reached.prefixed("connect to " + who + ": ");
        const Status key =
            RemoteRegion::create(remotes_[i].ep->get(), info.region_base, info.region_key, &remotes_[i].region);
        if (!key.is_ok()) return key.prefixed("remote key of " + who + ": ");
        remotes_[i].message_max = remotes_[i].ep->rma_emulated() ? layout_.slot_size : kActiveMessageMax;
        remotes_[i].channel_id = info.channel_id;
    }
    return Status::ok();
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
    return track(ucp_put_nbx(rm.ep->get(), src, bytes, rm.region->base() + remote_offset, rm.region->key(), &param),
                 "put", user_source ? src : nullptr, bytes, l.rank);
}

bool UcxChannels::send_message(const Link &l, const AmHeader &header, const void *src, size_t bytes)
{
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;  // the handler needs the data in hand
    return track(ucp_am_send_nbx(remote_of(l).ep->get(), UcxContext::kAmId, &header, sizeof header, src, bytes, &param),
                 "active message", bytes ? src : nullptr, bytes, l.rank);
}

bool UcxChannels::track(ucs_status_ptr_t request, const char *what, const void *src, size_t bytes, int peer)
{
    if (UCS_PTR_IS_ERR(request)) {
        error_ = std::string(what) + " of " + std::to_string(bytes) + " bytes to rank " + std::to_string(peer) + ": " +
                 ucs_status_string(UCS_PTR_STATUS(request));
        return false;
    }
    if (request == nullptr) return true;  // done already
    const char *lo = static_cast<const char *>(src);
    pending_.push_back(Pending{request, lo, lo ? lo + bytes : nullptr, peer});
    return true;
}

void UcxChannels::on_message(const AmHeader &h, const void *data, size_t bytes)
{
    // Checked against our own layout: a malformed message must not write outside it.
    if (h.index < 0 || h.index >= layout_.neighbors) return;
    if (h.kind == AmHeader::Credit) {
        const size_t at = layout_.credit_offset(h.index);
        if (h.value > load(at)) store(at, h.value);  // credits only grow
        return;
    }
    if (h.kind != AmHeader::Data || h.slot >= static_cast<uint32_t>(layout_.slots) || bytes > layout_.slot_size) return;
    if (bytes > 0) std::memcpy(region() + layout_.data_offset(h.index, static_cast<int>(h.slot)), data, bytes);
    store(layout_.flag_offset(h.index, static_cast<int>(h.slot)), h.value);
}

Poll UcxChannels::deliver(Link &l, int slot, const void *src, size_t bytes, uint64_t flag)
{
    Remote &rm = remote_of(l);
    if (bytes <= rm.message_max) {
        // The header must outlive the send: one per slot, reused only once the
        // receiver has returned the slot.
        AmHeader &h = rm.data_headers[static_cast<size_t>(slot)];
        h.target = rm.channel_id;
        h.kind = AmHeader::Data;
        h.index = l.index_there;
        h.slot = static_cast<uint32_t>(slot);
        h.value = flag;
        return send_message(l, h, src, bytes) ? Poll::Done : Poll::Failed;
    }
    if (bytes > 0 && !put(l, src, bytes, l.remote.data_offset(l.index_there, slot), true)) return Poll::Failed;
    // The flag must not become visible before the data it announces.
    const ucs_status_t st = ucp_worker_fence(context_.worker());
    if (st != UCS_OK) {
        error_ = "fence toward rank " + std::to_string(l.rank) + ": " + ucs_status_string(st);
        return Poll::Failed;
    }
    rm.flag_values[static_cast<size_t>(slot)] = flag;
    if (!put(l, &rm.flag_values[static_cast<size_t>(slot)], sizeof(uint64_t), l.remote.flag_offset(l.index_there, slot),
             false))
        return Poll::Failed;
    return Poll::Done;
}

void UcxChannels::return_credit(Link &l, uint64_t consumed)
{
    // Monotone counter: a newer value overtaking an older one is harmless, and so
    // is a pending send picking up a newer value from the reused header.
    Remote &rm = remote_of(l);
    AmHeader &h = rm.credit_header;
    h.target = rm.channel_id;
    h.kind = AmHeader::Credit;
    h.index = l.index_there;
    h.value = consumed;
    send_message(l, h, nullptr, 0);
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
