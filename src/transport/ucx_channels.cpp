#include "transport/ucx_channels.h"

#include <algorithm>
#include <cstring>

namespace gpurdma::transport {

UcxChannels::UcxChannels(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots, size_t slot_size,
                         int lanes)
    : SlotChannels(rank, size, peers, slots, slot_size),
      context_(context),
      lanes_(std::max(1, std::min(lanes, slots))),
      channel_id_(context.new_channel_id())
{
    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    flush_before_flag_ = major < 1 || (major == 1 && minor < 14);
    remotes_.resize(links_.size());
    offers_in_.resize(links_.size());
    for (auto &r : remotes_) {
        r.lanes.resize(static_cast<size_t>(lanes_));
        r.flag_values.assign(static_cast<size_t>(slots), 0);
        r.data_headers.assign(static_cast<size_t>(slots), AmHeader{});
    }
}

Status UcxChannels::create(UcxContext &context, int rank, int size, const PeerListFn &peers, int slots,
                           size_t slot_size, int lanes, std::unique_ptr<UcxChannels> *out)
{
    const Status symmetric_peers = symmetric(rank, peers);
    if (!symmetric_peers.is_ok()) return symmetric_peers;
    std::unique_ptr<UcxChannels> channels(new UcxChannels(context, rank, size, peers, slots, slot_size, lanes));
    // Flags and credits start at zero; the data slots are read only under a flag.
    const Status taken =
        context.landing().take(channels->layout_.bytes(), channels->layout_.data_start(), &channels->region_);
    if (!taken.is_ok()) return taken;
    channels->attach_region(channels->region_->base());
    // Only a complete channel receives: a failed one never registers its sink.
    context.add_sink(channels->channel_id_, channels.get());
    *out = std::move(channels);
    return Status::ok();
}

UcxChannels::~UcxChannels()
{
    // Requests still referencing our words finish first: the owner lets them
    // (requests_finished, drained) under its wait loop; one still running is abandoned.
    context_.remove_sink(channel_id_);
    abandon_requests();
    remotes_.clear();  // keys before endpoints, both before our region
    offered_range_.reset();
}

UcxPeerInfo UcxChannels::local_info() const
{
    UcxPeerInfo info;
    info.worker_address = context_.address();
    info.region_base = reinterpret_cast<uint64_t>(region_->base());
    info.key_region = region_->region_base();
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
        for (size_t k = 0; k < remotes_[i].lanes.size(); ++k) {
            Lane &lane = remotes_[i].lanes[k];
            const Status reached = context_.endpoint(info.worker_address, static_cast<int>(k), &lane.ep);
            if (!reached.is_ok()) return reached.prefixed("connect to " + who + ": ");
            std::shared_ptr<RemoteKey> key;
            const Status unpacked = lane.ep->remote_key(info.key_region, info.region_key, &key);
            if (!unpacked.is_ok()) return unpacked.prefixed("remote key of " + who + ": ");
            lane.region = std::make_unique<RemoteRegion>(std::move(key), info.region_base);
        }
        const Lane &first = remotes_[i].lanes[0];
        remotes_[i].message_max = first.ep->rma_emulated() ? layout_.slot_size : kActiveMessageMax;
        remotes_[i].channel_id = info.channel_id;
    }
    return Status::ok();
}

UcxChannels::Remote &UcxChannels::remote_of(const Link &l)
{
    // links_ and remotes_ are parallel: the link's position is its index.
    return remotes_[static_cast<size_t>(&l - links_.data())];
}

bool UcxChannels::put(const Link &l, const Lane &lane, const RemoteRegion &to, const void *src, size_t bytes,
                      size_t remote_offset, bool user_source)
{
    ucp_request_param_t param{};
    return track(ucp_put_nbx(lane.ep->get(), src, bytes, to.base() + remote_offset, to.key(), &param), "put",
                 user_source ? src : nullptr, bytes, l.rank);
}

Status UcxChannels::offer_landing(void *base, ucs_memory_type_t type, OfferedToHost to_host)
{
    if (offered_range_) return Status::error(GPURDMA_ERR_TRANSPORT, "memory for arrivals was offered already");
    memory_api_ = std::make_unique<UcpMemoryApi>(context_.context());
    const Status registered = RegisteredRange::create(*memory_api_, base, offered_bytes(), type, &offered_range_);
    if (!registered.is_ok()) return registered.prefixed("registering memory for arrivals: ");
    attach_offered(static_cast<char *>(base), std::move(to_host));
    const std::string &key = offered_range_->packed_key();
    for (size_t i = 0; i < links_.size(); ++i) {
        AmHeader &h = remotes_[i].offer_header;  // outlives the send, as the key does
        h.target = remotes_[i].channel_id;
        h.kind = AmHeader::Offer;
        h.index = links_[i].index_there;
        h.value = reinterpret_cast<uint64_t>(base);
        if (!send_message(links_[i], h, key.data(), key.size()))
            return Status::error(GPURDMA_ERR_TRANSPORT, "offering memory for arrivals: " + error_);
    }
    return Status::ok();
}

void UcxChannels::withdraw_landing()
{
    attach_offered(nullptr, {});
    // The offers' sends read the key: finished (requests_finished), or abandoned now.
    abandon_requests();
    offered_range_.reset();
}

bool UcxChannels::requests_finished()
{
    if (!sends_pending()) return true;
    context_.progress();
    return false;
}

void UcxChannels::abandon_requests()
{
    for (auto &d : deferred_) context_.abandon(d.flush);
    deferred_.clear();
    for (auto &p : pending_) context_.abandon(p.request);
    pending_.clear();
}

int UcxChannels::peers_offering() const
{
    int n = 0;
    for (const auto &r : remotes_) n += r.lanes[0].offered != nullptr;
    return n;
}

void UcxChannels::adopt_offers()
{
    std::lock_guard<std::mutex> hold(offers_lock_);
    offers_waiting_.store(false, std::memory_order_relaxed);
    for (size_t i = 0; i < offers_in_.size(); ++i) {
        if (!offers_in_[i]) continue;
        // A key we cannot unpack (on any lane) leaves that peer's messages in its host slots.
        std::vector<std::unique_ptr<RemoteRegion>> regions(remotes_[i].lanes.size());
        bool all = true;
        for (size_t k = 0; k < regions.size() && all; ++k)
            all = RemoteRegion::create(remotes_[i].lanes[k].ep->get(), offers_in_[i]->base, offers_in_[i]->key,
                                       &regions[k])
                      .is_ok();
        for (size_t k = 0; k < regions.size() && all; ++k) remotes_[i].lanes[k].offered = std::move(regions[k]);
        offers_in_[i].reset();
    }
}

bool UcxChannels::send_message(const Link &l, const AmHeader &header, const void *src, size_t bytes, int lane)
{
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;  // the handler needs the data in hand
    return track(ucp_am_send_nbx(remote_of(l).lane_of(lane).ep->get(), UcxContext::kAmId, &header, sizeof header, src,
                                 bytes, &param),
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
    if (h.kind == AmHeader::Offer) {
        std::lock_guard<std::mutex> hold(offers_lock_);
        offers_in_[static_cast<size_t>(h.index)] =
            IncomingOffer{h.value, std::string(static_cast<const char *>(data), bytes)};
        offers_waiting_.store(true, std::memory_order_release);
        return;
    }
    if (h.kind == AmHeader::Credit) {
        const size_t at = layout_.credit_offset(h.index);
        if (h.value > load(at)) store(at, h.value);  // credits only grow
        return;
    }
    if (h.kind != AmHeader::Data || h.slot >= static_cast<uint32_t>(layout_.slots) || bytes > layout_.slot_size) return;
    if (bytes > 0) std::memcpy(region() + layout_.data_offset(h.index, static_cast<int>(h.slot)), data, bytes);
    store(layout_.flag_offset(h.index, static_cast<int>(h.slot)), h.value);
}

Poll UcxChannels::deliver(Link &l, int slot, const void *src, size_t bytes, uint64_t flag, Reader receiver)
{
    if (receiver == Reader::Gpu && offers_waiting_.load(std::memory_order_acquire)) adopt_offers();
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
        return send_message(l, h, src, bytes, slot) ? Poll::Done : Poll::Failed;
    }
    // Put: into the peer's offered memory if its GPU reads it, else into its slot.
    const Lane &lane = rm.lane_of(slot);
    const bool offered = receiver == Reader::Gpu && lane.offered;
    const size_t at = l.remote.data_offset(l.index_there, slot);
    if (offered) flag |= kLandedOffered;
    if (bytes > 0 && !(offered ? put(l, lane, *lane.offered, src, bytes, at - l.remote.data_start(), true)
                               : put(l, lane, *lane.region, src, bytes, at, true)))
        return Poll::Failed;
    if (offered && flush_before_flag_) {
        // The data is in place once the flush completes; the flag goes then.
        ucp_request_param_t param{};
        const ucs_status_ptr_t flush = ucp_ep_flush_nbx(lane.ep->get(), &param);
        if (UCS_PTR_IS_ERR(flush)) {
            error_ = "flush toward rank " + std::to_string(l.rank) + ": " + ucs_status_string(UCS_PTR_STATUS(flush));
            return Poll::Failed;
        }
        if (flush != nullptr) {
            deferred_.push_back(DeferredFlag{flush, static_cast<size_t>(&l - links_.data()), slot});
            rm.flag_values[static_cast<size_t>(slot)] = flag;
            return Poll::Done;
        }
        return put_flag(l, slot, flag) ? Poll::Done : Poll::Failed;
    }
    // The flag must not become visible before the data it announces.
    const ucs_status_t st = ucp_worker_fence(context_.worker());
    if (st != UCS_OK) {
        error_ = "fence toward rank " + std::to_string(l.rank) + ": " + ucs_status_string(st);
        return Poll::Failed;
    }
    return put_flag(l, slot, flag) ? Poll::Done : Poll::Failed;
}

bool UcxChannels::put_flag(const Link &l, int slot, uint64_t flag)
{
    Remote &rm = remote_of(l);
    rm.flag_values[static_cast<size_t>(slot)] = flag;
    const Lane &lane = rm.lane_of(slot);
    return put(l, lane, *lane.region, &rm.flag_values[static_cast<size_t>(slot)], sizeof(uint64_t),
               l.remote.flag_offset(l.index_there, slot), false);
}

void UcxChannels::post_deferred_flags()
{
    // In order: a link's flags must not overtake each other (a later one's flush can
    // only complete after an earlier one's anyway).
    size_t done = 0;
    for (; done < deferred_.size(); ++done) {
        const DeferredFlag &d = deferred_[done];
        const ucs_status_t st = ucp_request_check_status(d.flush);
        if (st == UCS_INPROGRESS) break;
        ucp_request_free(d.flush);
        const Link &l = links_[d.link];
        if (st != UCS_OK) {
            if (error_.empty()) error_ = "flush toward rank " + std::to_string(l.rank) + ": " + ucs_status_string(st);
            continue;
        }
        put_flag(l, d.slot, remote_of(l).flag_values[static_cast<size_t>(d.slot)]);
    }
    deferred_.erase(deferred_.begin(), deferred_.begin() + static_cast<std::ptrdiff_t>(done));
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
    poll_sends();
    if (pending_.empty()) return !deferred_.empty();
    reap();
    return !pending_.empty() || !deferred_.empty();
}

}  // namespace gpurdma::transport
