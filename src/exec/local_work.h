// Where a schedule's local work runs: the copies and reductions of exec::Executor's
// steps, and the memory its sends read. HostLocalWork does each at once with the host
// reduction. A GPU (gpu/device_rail_work.h) queues them on a stream instead and says
// when they are done, and may first stage a send's bytes into memory the network can
// read. The executor starts one piece of work at a time and polls finished() before
// the step that depends on it, so an asynchronous engine needs no ordering of its own.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "gpurdma/gpurdma.h"
#include "transport/transport.h"

namespace gpurdma::exec {

class LocalWork {
public:
    virtual ~LocalWork() = default;

    // dst <- src: the same memory (nothing to do) or disjoint spans, as a schedule's are.
    virtual Status copy(void *dst, const void *src, size_t bytes) = 0;
    // dst = a OP b, element by element (dst may be a or b).
    virtual Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                          size_t count) = 0;
    // dst = srcs[0] OP srcs[1] OP ... OP srcs[n-1], folded left to right (a node's
    // members in order: the same bits on every path). n == 1: a copy. dst may be one
    // of the sources (in place). This default folds with reduce() and copy() and is for
    // work done at once (it may fold into a temporary); a GPU overrides it (one kernel).
    virtual Status reduce_many(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *const *srcs, int n,
                               size_t count, size_t elem_size);
    // Where a send of [src, src + bytes) reads from: *from = src, or a staging copy this
    // starts (finished() then says when it is there); *from = nullptr when no staging
    // memory is free yet (ask again later).
    virtual Status send_source(const void *src, size_t bytes, const void **from) = 0;
    // Whether everything started so far has finished.
    virtual Status finished(bool *done) = 0;
    // Who reads what lands here (and, peers assume, what we send them).
    virtual transport::Reader reader() const = 0;
};

// The host: everything done before the call returns.
class HostLocalWork final : public LocalWork {
public:
    Status copy(void *dst, const void *src, size_t bytes) override;
    Status reduce(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                  size_t count) override;
    Status send_source(const void *src, size_t, const void **from) override
    {
        *from = src;
        return Status::ok();
    }
    Status finished(bool *done) override
    {
        *done = true;
        return Status::ok();
    }
    transport::Reader reader() const override { return transport::Reader::Cpu; }

    // One for every executor that is given none: it has no state.
    static HostLocalWork &instance();
};

}  // namespace gpurdma::exec
