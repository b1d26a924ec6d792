#include "transport/ucx_context.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "transport/ucx_init.h"

namespace gpurdma::transport {

namespace {

Status ucx_error(const std::string &what, ucs_status_t status)
{
    return Status::error(GPURDMA_ERR_NO_RESOURCE, what + ": " + ucs_status_string(status));
}

}  // namespace

std::string uct_table_key(const char *prefix, const char *field, unsigned ucx_major, unsigned ucx_minor)
{
    const bool prefixed = ucx_major > 1 || (ucx_major == 1 && ucx_minor >= 17);
    return prefixed ? std::string(prefix) + field : std::string(field);
}

std::vector<std::pair<std::string, std::string>> ucx_ib_config(const UcxIbSettings &ib, unsigned ucx_major,
                                                               unsigned ucx_minor)
{
    std::vector<std::pair<std::string, std::string>> out;
    if (ib.gid_index >= 0)
        out.emplace_back(uct_table_key("IB_", "GID_INDEX", ucx_major, ucx_minor), std::to_string(ib.gid_index));
    if (ib.tc >= 0) out.emplace_back("IB_TRAFFIC_CLASS", std::to_string(ib.tc));
    if (ib.sl >= 0) out.emplace_back("IB_SL", std::to_string(ib.sl));
    return out;
}

Status UcxContext::create(const std::string &tls, const std::string &net_devices, const UcxIbSettings &ib,
                          std::unique_ptr<UcxContext> *out, bool thread_safe, double init_bound_s)
{
    std::unique_ptr<UcxContext> context(new UcxContext());
    context->thread_safe_ = thread_safe;
    context->init_bound_s_ = init_bound_s;
    const Status started = context->start(tls, net_devices, ib);
    if (started.is_ok()) *out = std::move(context);
    return started;
}

// Fills context_ and worker_; the destructor releases whatever was made.
Status UcxContext::start(const std::string &tls, const std::string &net_devices, const UcxIbSettings &ib)
{
    unsigned ucx_major = 0, ucx_minor = 0, ucx_release = 0;
    ucp_get_version(&ucx_major, &ucx_minor, &ucx_release);
    ucp_config_t *config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) return ucx_error("ucp_config_read", st);
    if (!tls.empty()) {
        st = ucp_config_modify(config, "TLS", tls.c_str());
        if (st != UCS_OK) {
            ucp_config_release(config);
            return ucx_error("UCX transports '" + tls + "'", st);
        }
    }
    if (!net_devices.empty()) {
        st = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
        if (st != UCS_OK) {
            ucp_config_release(config);
            return ucx_error("UCX network devices '" + net_devices + "'", st);
        }
    }
    // UCX's tcp transport moves RMA in 8 KiB segments by default; our puts are whole
    // landing slots, and larger segments move them several times faster. The user's
    // own UCX_TCP_* settings win.
    // (The key's form depends on the UCX version, like GID_INDEX's: see ucx_ib_config.)
    for (const char *key : {"TX_SEG_SIZE", "RX_SEG_SIZE"})
        if (!std::getenv((std::string("UCX_TCP_") + key).c_str()))
            (void)ucp_config_modify(config, uct_table_key("TCP_", key, ucx_major, ucx_minor).c_str(), "256k");
    // A thread-safe worker locks each call with a spinlock by default: with more threads
    // than cores, a holder preempted mid-call stalls every spinner for its time slice
    // (3 threads x 30 calls over tcp: 5.5 s spinning, 1.0 s with a mutex). The user's
    // UCX_USE_MT_MUTEX wins.
    if (thread_safe_ && !std::getenv("UCX_USE_MT_MUTEX")) (void)ucp_config_modify(config, "USE_MT_MUTEX", "y");
    // Only what the user set: UCX's own defaults (and UCX_IB_* in the environment) stay
    // otherwise. An unknown key is kept by UCX, so this cannot fail on a UCX without IB.
    for (const auto &[key, value] : ucx_ib_config(ib, ucx_major, ucx_minor)) {
        st = ucp_config_modify(config, key.c_str(), value.c_str());
        if (st != UCS_OK) {
            ucp_config_release(config);
            return ucx_error("UCX setting " + key + "=" + value, st);
        }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    // Set-ups of communicators in different threads map memory on the context at once.
    params.mt_workers_shared = thread_safe_ ? 1 : 0;
    const Status inited = init_ucp_bounded(params, config, init_bound_s_, &context_);
    if (!inited.is_ok()) return inited;
    landing_ = std::make_unique<LandingPool>(context_);

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = thread_safe_ ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(context_, &wparams, &worker_);
    if (st != UCS_OK) {
        worker_ = nullptr;
        return ucx_error("ucp_worker_create", st);
    }
    if (thread_safe_) {
        // A UCX built without --enable-mt gives a single-threaded worker when asked for more.
        ucp_worker_attr_t attr{};
        attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
        if (ucp_worker_query(worker_, &attr) != UCS_OK || attr.thread_mode != UCS_THREAD_MODE_MULTI)
            return Status::unsupported("this UCX cannot make a thread-safe worker (built without --enable-mt)");
    }
    ucp_address_t *addr = nullptr;
    size_t len = 0;
    st = ucp_worker_get_address(worker_, &addr, &len);
    if (st != UCS_OK) return ucx_error("ucp_worker_get_address", st);
    address_.assign(reinterpret_cast<const char *>(addr), len);
    ucp_worker_release_address(worker_, addr);
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                         UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = kAmId;
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    handler.cb = &UcxContext::on_am;
    handler.arg = this;
    st = ucp_worker_set_am_recv_handler(worker_, &handler);
    if (st != UCS_OK) return ucx_error("ucp_worker_set_am_recv_handler", st);
    return Status::ok();
}

ucs_status_t UcxContext::on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                               const ucp_am_recv_param_t *param)
{
    auto *self = static_cast<UcxContext *>(arg);
    // Senders force the eager protocol, so the data is here (valid during this call); a
    // rendezvous announcement is not ours.
    if (header_length != sizeof(AmHeader) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
    AmHeader h;
    std::memcpy(&h, header, sizeof h);
    // A message for a channel already released (its communicator freed) is dropped.
    std::lock_guard<std::mutex> hold(self->sinks_lock_);
    const auto it = self->sinks_.find(h.target);
    if (it != self->sinks_.end()) it->second->on_message(h, data, length);
    return UCS_OK;
}

UcxContext::~UcxContext()
{
    // Closed before the worker goes: a close the owner did not run to completion
    // (start_close, closes_running) is abandoned, never waited for here.
    start_close();
    endpoints_.clear();
    landing_.reset();
    if (worker_) ucp_worker_destroy(worker_);
    if (context_) ucp_cleanup(context_);
}

void UcxContext::start_close()
{
    std::lock_guard<std::mutex> hold(endpoints_lock_);
    for (auto &e : endpoints_) e.second->start_close();
}

size_t UcxContext::closes_running()
{
    if (worker_) ucp_worker_progress(worker_);
    std::lock_guard<std::mutex> hold(endpoints_lock_);
    size_t running = 0;
    for (auto &e : endpoints_) running += e.second->close_done() ? 0 : 1;
    return running;
}

bool UcxContext::worker_quiet()
{
    if (!worker_) return true;
    quiet_polls_ = ucp_worker_progress(worker_) ? 0 : quiet_polls_ + 1;
    return quiet_polls_ >= kQuietPolls;
}

void UcxContext::add_sink(uint64_t target, AmSink *sink)
{
    std::lock_guard<std::mutex> hold(sinks_lock_);
    sinks_[target] = sink;
}

void UcxContext::remove_sink(uint64_t target)
{
    std::lock_guard<std::mutex> hold(sinks_lock_);
    sinks_.erase(target);
}

Status UcxContext::endpoint(const std::string &address, int lane, std::shared_ptr<UcxEndpoint> *out)
{
    std::lock_guard<std::mutex> hold(endpoints_lock_);
    auto it = endpoints_.find({address, lane});
    if (it != endpoints_.end()) {
        *out = it->second;
        return Status::ok();
    }
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    params.address = reinterpret_cast<const ucp_address_t *>(address.data());
    ucp_ep_h ep = nullptr;
    const ucs_status_t st = ucp_ep_create(worker_, &params, &ep);
    if (st != UCS_OK) return ucx_error("ucp_ep_create", st);
    auto shared = std::make_shared<UcxEndpoint>(*this, ep);
    endpoints_[{address, lane}] = shared;
    *out = std::move(shared);
    return Status::ok();
}

void UcxContext::abandon(void *request)
{
    if (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_request_cancel(worker_, request);
    ucp_request_free(request);
}

UcxEndpoint::UcxEndpoint(UcxContext &context, ucp_ep_h ep) : context_(context), ep_(ep)
{
    char *text = nullptr;
    size_t size = 0;
    if (FILE *stream = open_memstream(&text, &size)) {
        ucp_ep_print_info(ep_, stream);
        std::fclose(stream);
        rma_emulated_ = rma_emulated_in(std::string(text, size));
        std::free(text);
    }
}

bool rma_emulated_in(const std::string &info)
{
    // Lines like "#   lane[0]:  0:tcp/eth0.0 md[0]  -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup".
    bool any_lane = false;
    std::istringstream lines(info);
    for (std::string line; std::getline(lines, line);) {
        const size_t lane = line.find("lane[");
        if (lane == std::string::npos) continue;
        any_lane = true;
        std::istringstream words(line.substr(lane));
        std::string word, resource;
        words >> word >> resource;  // "lane[0]:" and "0:tcp/eth0.0"
        bool rma = false;
        while (words >> word) rma = rma || word == "rma" || word.rfind("rma#", 0) == 0 || word.rfind("rma_bw", 0) == 0;
        if (!rma) continue;
        const size_t colon = resource.find(':'), slash = resource.find('/');
        if (colon == std::string::npos || slash == std::string::npos || slash < colon) return false;
        if (resource.substr(colon + 1, slash - colon - 1) != "tcp") return false;
    }
    return any_lane;  // only tcp lanes do RMA, or none does (UCX emulates it over messages)
}

UcxEndpoint::~UcxEndpoint()
{
    start_close();
    if (closing_) context_.abandon(closing_);
}

Status UcxEndpoint::remote_key(uint64_t region_base, const std::string &packed_key, std::shared_ptr<RemoteKey> *out)
{
    std::lock_guard<std::mutex> hold(keys_lock_);
    auto &key = keys_[{region_base, packed_key}];
    if (!key) {
        const Status unpacked = RemoteKey::unpack(ep_, packed_key, &key);
        if (!unpacked.is_ok()) {
            keys_.erase({region_base, packed_key});
            return unpacked;
        }
    }
    *out = key;
    return Status::ok();
}

void UcxEndpoint::start_close()
{
    if (close_started_) return;
    close_started_ = true;
    {
        // No communicator is left to put with them: keys go before their endpoint.
        std::lock_guard<std::mutex> hold(keys_lock_);
        keys_.clear();
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    const ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &param);
    // Null: closed at once; an error: nothing left to complete.
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing_ = request;
}

bool UcxEndpoint::close_done()
{
    if (!closing_) return close_started_;
    if (ucp_request_check_status(closing_) == UCS_INPROGRESS) return false;
    ucp_request_free(closing_);
    closing_ = nullptr;
    return true;
}

}  // namespace gpurdma::transport
