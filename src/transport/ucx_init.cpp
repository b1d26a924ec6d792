#include "transport/ucx_init.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace gpurdma::transport {

namespace {

// What the thread and the waiting set-up share; whoever is last frees it.
struct Init {
    std::mutex lock;
    std::condition_variable finished;
    bool done = false;
    bool abandoned = false;  // the set-up stopped waiting: the thread cleans up
    ucs_status_t status = UCS_OK;
    ucp_context_h context = nullptr;
};

}  // namespace

Status init_ucp_bounded(const ucp_params_t &params, ucp_config_t *config, double bound_s, ucp_context_h *out)
{
    auto init = std::make_shared<Init>();
    try {
        std::thread([init, params, config] {
            ucp_context_h context = nullptr;
            const ucs_status_t st = ucp_init(&params, config, &context);
            ucp_config_release(config);
            std::lock_guard<std::mutex> hold(init->lock);
            if (init->abandoned) {
                if (st == UCS_OK) ucp_cleanup(context);
                return;
            }
            init->status = st;
            init->context = st == UCS_OK ? context : nullptr;
            init->done = true;
            init->finished.notify_all();
        }).detach();
    } catch (const std::system_error &e) {
        ucp_config_release(config);
        return Status::error(GPURDMA_ERR_NO_RESOURCE, std::string("no thread for ucp_init: ") + e.what());
    }
    std::unique_lock<std::mutex> hold(init->lock);
    const auto bound = std::chrono::duration<double>(bound_s);
    if (!init->finished.wait_for(hold, bound, [&] { return init->done; })) {
        init->abandoned = true;
        char why[128];
        std::snprintf(why, sizeof why, "ucp_init did not return within %g s (coll_gpurdma_timeout)", bound_s);
        return Status::error(GPURDMA_ERR_TIMEOUT, why);
    }
    if (init->status != UCS_OK)
        return Status::error(GPURDMA_ERR_NO_RESOURCE, std::string("ucp_init: ") + ucs_status_string(init->status));
    *out = init->context;
    return Status::ok();
}

}  // namespace gpurdma::transport
