// One UCX context and worker per process, shared by every communicator, with one
// endpoint per peer process (keyed by its worker address), kept until the context
// goes: communicators come and go (1,000 dup/free cycles) without reconnecting,
// and without the sockets a closed-and-reopened tcp endpoint leaves behind.
#pragma once

#include <ucp/api/ucp.h>

#include <map>
#include <memory>
#include <string>

namespace gpurdma::transport {

class UcxEndpoint;

class UcxContext {
public:
    // Throws std::runtime_error with UCX's reason when the context cannot start.
    // tls: UCX_TLS for our context ("" = UCX's); net_devices: UCX_NET_DEVICES ("" = UCX's).
    UcxContext(const std::string &tls, const std::string &net_devices);
    ~UcxContext();
    UcxContext(const UcxContext &) = delete;
    UcxContext &operator=(const UcxContext &) = delete;

    ucp_context_h context() const { return context_; }
    ucp_worker_h worker() const { return worker_; }
    const std::string &address() const { return address_; }

    // Returns events processed; cheap when there is nothing to do.
    unsigned progress() { return ucp_worker_progress(worker_); }

    // The endpoint to the worker at `address`, created on first use.
    std::shared_ptr<UcxEndpoint> endpoint(const std::string &address, std::string *error);

    // Completes a request with progress, at most timeout_s; frees it. Returns its status
    // (UCS_ERR_TIMED_OUT if it did not finish).
    ucs_status_t wait(ucs_status_ptr_t request, double timeout_s);

private:
    ucp_context_h context_ = nullptr;
    ucp_worker_h worker_ = nullptr;
    std::string address_;
    std::map<std::string, std::shared_ptr<UcxEndpoint>> endpoints_;
};

class UcxEndpoint {
public:
    UcxEndpoint(UcxContext &context, ucp_ep_h ep) : context_(context), ep_(ep) {}
    ~UcxEndpoint();
    UcxEndpoint(const UcxEndpoint &) = delete;
    UcxEndpoint &operator=(const UcxEndpoint &) = delete;
    ucp_ep_h get() const { return ep_; }

private:
    UcxContext &context_;
    ucp_ep_h ep_;
};

}  // namespace gpurdma::transport
