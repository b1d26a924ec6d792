/*
 * LD_PRELOAD for the fault tests: ucp_init hangs (sleeps for good) when gpurdma calls it
 * on the world ranks listed in GPURDMA_TEST_UCP_INIT_HANG ("1" or "0,2"); every other
 * caller (Open MPI's own UCX components) and every other rank get the real one. It
 * shows that a communicator's set-up still ends within coll_gpurdma_timeout on every
 * rank when UCX never comes up on one (transport/ucx_init.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

typedef ucs_status_t (*init_fn)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *, ucp_context_h *);

static int listed(const char *list, const char *rank)
{
    const size_t n = strlen(rank);
    for (const char *p = list; p && *p;) {
        if (strncmp(p, rank, n) == 0 && (p[n] == ',' || p[n] == '\0')) return 1;
        p = strchr(p, ',');
        if (p) ++p;
    }
    return 0;
}

ucs_status_t ucp_init_version(unsigned api_major, unsigned api_minor, const ucp_params_t *params,
                              const ucp_config_t *config, ucp_context_h *context)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    Dl_info caller;
    if (rank && listed(getenv("GPURDMA_TEST_UCP_INIT_HANG"), rank) &&
        dladdr(__builtin_return_address(0), &caller) && caller.dli_fname && strstr(caller.dli_fname, "gpurdma"))
        for (;;) pause();
    init_fn real = (init_fn)dlsym(RTLD_NEXT, "ucp_init_version");
    return real ? real(api_major, api_minor, params, config, context) : UCS_ERR_UNSUPPORTED;
}
