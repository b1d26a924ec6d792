// ucp_init under a bound. It runs on a thread of its own while the set-up waits for it
// at most bound_s: a UCX that hangs there (seen with UCX 1.18.1 under the GPU stand-in
// launcher) then costs this rank the bound and makes its communicator decline, instead
// of leaving every peer waiting in the set-up's exchange for good. The thread stays
// until ucp_init returns (then it cleans up the context nobody took), which is all a
// process can do about a call that never returns.
#pragma once

#include <ucp/api/ucp.h>

#include "base/status.h"

namespace gpurdma::transport {

// ucp_init(params, config); config is released either way (by the thread, once the
// call returns). Not ok: UCX's error, or the bound passed ("did not return within").
Status init_ucp_bounded(const ucp_params_t &params, ucp_config_t *config, double bound_s, ucp_context_h *out);

}  // namespace gpurdma::transport
