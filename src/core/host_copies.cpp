// Host copies of GPU buffers for the previous module (include/gpurdma/gpurdma.h): both
// shims (Open MPI's component, the MPICH interposer) stage declined calls this way.
#include <algorithm>
#include <memory>
#include <new>

#include "gpurdma/gpurdma.h"

struct gpurdma_host_copies {
    // The GPU buffers at their true lower bounds (send null: in place, or no send span).
    const char *send = nullptr;
    char *recv = nullptr;
    ptrdiff_t send_lb = 0, recv_lb = 0;
    size_t send_span = 0, recv_span = 0;
    std::unique_ptr<char[]> host_send, host_recv;
};

extern "C" {

gpurdma_status_t gpurdma_host_copies_create_spans(const void *send, size_t send_span, ptrdiff_t send_lb, void *recv,
                                                  size_t recv_span, ptrdiff_t recv_lb, gpurdma_host_copies_t **out)
{
    *out = nullptr;
    try {
        auto c = std::make_unique<gpurdma_host_copies>();
        c->send_span = send ? send_span : 0;
        c->recv_span = recv_span;
        c->send_lb = send_lb;
        c->recv_lb = recv_lb;
        c->send = send ? static_cast<const char *>(send) + send_lb : nullptr;
        c->recv = static_cast<char *>(recv) + recv_lb;
        if (send) c->host_send.reset(new char[std::max<size_t>(c->send_span, 1)]);
        c->host_recv.reset(new char[std::max<size_t>(c->recv_span, 1)]);
        const gpurdma_status_t st = gpurdma_host_copies_fill(c.get());
        if (st != GPURDMA_OK) return st;
        *out = c.release();
        return GPURDMA_OK;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    }
}

gpurdma_status_t gpurdma_host_copies_create(const void *send, void *recv, size_t count, ptrdiff_t extent,
                                            ptrdiff_t true_lb, ptrdiff_t true_extent, gpurdma_host_copies_t **out)
{
    const size_t span = count > 0 ? (count - 1) * static_cast<size_t>(extent) + static_cast<size_t>(true_extent) : 0;
    return gpurdma_host_copies_create_spans(send, span, true_lb, recv, span, true_lb, out);
}

gpurdma_status_t gpurdma_host_copies_fill(gpurdma_host_copies_t *c)
{
    gpurdma_status_t st = GPURDMA_OK;
    if (c->recv_span) st = gpurdma_memcpy(c->host_recv.get(), c->recv, c->recv_span);
    if (st == GPURDMA_OK && c->send_span) st = gpurdma_memcpy(c->host_send.get(), c->send, c->send_span);
    return st;
}

void *gpurdma_host_copies_send(gpurdma_host_copies_t *c)
{
    return c->send ? c->host_send.get() - c->send_lb : nullptr;
}

void *gpurdma_host_copies_recv(gpurdma_host_copies_t *c)
{
    return c->host_recv.get() - c->recv_lb;
}

gpurdma_status_t gpurdma_host_copies_copy_back(gpurdma_host_copies_t *c)
{
    return c->recv_span ? gpurdma_memcpy(c->recv, c->host_recv.get(), c->recv_span) : GPURDMA_OK;
}

void gpurdma_host_copies_destroy(gpurdma_host_copies_t *c)
{
    delete c;
}

gpurdma_status_t gpurdma_staged_host_call(const void *send, void *recv, size_t count, ptrdiff_t extent,
                                          ptrdiff_t true_lb, ptrdiff_t true_extent, gpurdma_host_call_fn_t call,
                                          void *arg, int *call_rc)
{
    gpurdma_host_copies_t *copies = nullptr;
    gpurdma_status_t st = gpurdma_host_copies_create(send, recv, count, extent, true_lb, true_extent, &copies);
    if (st != GPURDMA_OK) return st;
    const std::unique_ptr<gpurdma_host_copies_t, void (*)(gpurdma_host_copies_t *)> owned(copies,
                                                                                          gpurdma_host_copies_destroy);
    *call_rc = call(gpurdma_host_copies_send(copies), gpurdma_host_copies_recv(copies), arg);
    return *call_rc == 0 ? gpurdma_host_copies_copy_back(copies) : GPURDMA_OK;
}

}  // extern "C"
