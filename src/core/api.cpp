// extern "C" entry points: argument checks, exception barrier, then the C++ objects.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "algo/call_spans.h"
#include "core/comm.h"
#include "core/context.h"
#include "core/counters.h"
#include "core/params.h"
#include "core/request.h"
#include "gpu/gpu_runtime.h"
#include "gpurdma/gpurdma.h"

namespace {

// The argument checks every entry point shares; the call (sendbuf NULL: in place).
gpurdma_status_t check_call(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args, gpurdma::algo::Call *call)
{
    using gpurdma::plan::Coll;
    if (!comm || !args || static_cast<unsigned>(args->coll) >= GPURDMA_COLL_COUNT) return GPURDMA_ERR_INVALID;
    if (static_cast<unsigned>(args->dtype) >= GPURDMA_DTYPE_COUNT ||
        static_cast<unsigned>(args->op) >= GPURDMA_OP_COUNT)
        return GPURDMA_ERR_UNSUPPORTED;
    const Coll coll = static_cast<Coll>(args->coll);
    if ((coll == Coll::Bcast || coll == Coll::Reduce) && (args->root < 0 || args->root >= comm->size))
        return GPURDMA_ERR_INVALID;
    *call = gpurdma::algo::Call{};
    call->coll = coll;
    call->recvbuf = args->recvbuf;
    call->count = args->count;
    call->dtype = args->dtype;
    call->op = args->op;
    call->root = args->root;
    if (coll == Coll::ReduceScatter && args->counts) {
        // Equal counts are the block form: nothing to copy.
        const size_t *c = args->counts, n = static_cast<size_t>(comm->size);
        if (std::all_of(c, c + n, [&](size_t v) { return v == c[0]; })) call->count = c[0];
        else call->counts.assign(c, c + n);
    }
    const bool in_place = args->sendbuf == nullptr || args->sendbuf == args->recvbuf || coll == Coll::Bcast;
    call->sendbuf = in_place ? nullptr : args->sendbuf;
    // A receive buffer wherever this rank gets data.
    const bool receives = coll != Coll::Reduce || args->root == comm->rank;
    if (receives && !args->recvbuf && gpurdma::algo::recv_bytes(*call, comm->size, comm->rank) > 0)
        return GPURDMA_ERR_INVALID;
    if (!in_place && !args->sendbuf && gpurdma::algo::send_bytes(*call, comm->size, comm->rank) > 0)
        return GPURDMA_ERR_INVALID;
    return GPURDMA_OK;
}

gpurdma_coll_args_t allreduce_args(const void *sendbuf, void *recvbuf, size_t count, gpurdma_dtype_t dtype,
                                   gpurdma_op_t op)
{
    gpurdma_coll_args_t a{};
    a.coll = GPURDMA_COLL_ALLREDUCE;
    a.sendbuf = sendbuf;
    a.recvbuf = recvbuf;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    return a;
}

template <class Body> gpurdma_status_t guarded(gpurdma_comm_t *comm, const char *what, Body body)
{
    try {
        return body();
    } catch (const std::bad_alloc &) {
        comm->last_error = comm->name + ": out of memory " + what;
        return GPURDMA_ERR_NO_RESOURCE;
    } catch (const std::exception &e) {
        comm->last_error = comm->name + ": " + e.what();
        return GPURDMA_ERR_TRANSPORT;
    }
}

// MPI_Barrier's call: a one-byte allreduce from a constant zero into the communicator's
// own byte (no rank's result is complete before every rank's byte has arrived).
gpurdma::algo::Call barrier_call(gpurdma_comm_t *comm)
{
    static const uint8_t zero = 0;
    gpurdma::algo::Call call;
    call.coll = gpurdma::plan::Coll::Allreduce;
    call.sendbuf = &zero;
    call.recvbuf = &comm->barrier_result;
    call.count = 1;
    call.dtype = GPURDMA_UINT8;
    call.op = GPURDMA_MAX;
    call.barrier = true;
    return call;
}

gpurdma_status_t create_barrier(gpurdma_request::Kind kind, gpurdma_comm_t *comm, gpurdma_complete_fn_t complete,
                                void *arg, gpurdma_request_t **request)
{
    if (!comm || !request) return GPURDMA_ERR_INVALID;
    *request = nullptr;
    return guarded(comm, "starting a nonblocking or persistent barrier",
                   [&] { return comm->create(barrier_call(comm), kind, complete, arg, request); });
}

gpurdma_status_t create_request(gpurdma_request::Kind kind, gpurdma_comm_t *comm, const gpurdma_coll_args_t *args,
                                gpurdma_complete_fn_t complete, void *arg, gpurdma_request_t **request)
{
    if (!request) return GPURDMA_ERR_INVALID;
    *request = nullptr;
    gpurdma::algo::Call call;
    const gpurdma_status_t checked = check_call(comm, args, &call);
    if (checked != GPURDMA_OK) return checked;
    return guarded(comm, "starting a nonblocking or persistent collective",
                   [&] { return comm->create(call, kind, complete, arg, request); });
}

}  // namespace

extern "C" {

gpurdma_status_t gpurdma_context_create(const gpurdma_config_t *config, gpurdma_context_t **out)
{
    if (!config || !out) return GPURDMA_ERR_INVALID;
    *out = nullptr;
    gpurdma::Logger log(config->log, config->verbose);
    try {
        // The parameter table's ranges (the shim has already replaced what was out of them).
        const gpurdma::Status valid = gpurdma::params::check_config(*config);
        if (!valid.is_ok()) {
            log.log(0, "%s", valid.message().c_str());
            return valid.code();
        }
        if (!config->cuda) gpurdma::gpu::GpuRuntime::disable(gpurdma::gpu::Vendor::Cuda);
        if (!config->rocm) gpurdma::gpu::GpuRuntime::disable(gpurdma::gpu::Vendor::Hip);
        std::unique_ptr<gpurdma_context> context;
        const gpurdma::Status st = gpurdma_context::create(*config, &context);
        if (!st.is_ok()) {
            log.log(0, "%s", st.message().c_str());
            return st.code();
        }
        *out = context.release();
        return GPURDMA_OK;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    } catch (const std::exception &e) {
        log.log(0, "%s", e.what());
        return GPURDMA_ERR_INVALID;
    }
}

void gpurdma_context_destroy(gpurdma_context_t *context)
{
    delete context;
}

int gpurdma_context_progress(gpurdma_context_t *context)
{
    if (!context) return 0;
    try {
        return context->progress();
    } catch (const std::exception &) {
        return 0;  // the failing call reports itself on its next step
    }
}

gpurdma_status_t gpurdma_comm_create(gpurdma_context_t *context, const gpurdma_comm_params_t *params,
                                     gpurdma_comm_t **out)
{
    if (!context || !params || !out || !params->bootstrap.allgather || params->size < 1 || params->rank < 0 ||
        params->rank >= params->size)
        return GPURDMA_ERR_INVALID;
    try {
        *out = new gpurdma_comm(context, *params);
        return GPURDMA_OK;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    }
}

void gpurdma_comm_destroy(gpurdma_comm_t *comm)
{
    delete comm;
}

gpurdma_status_t gpurdma_collective(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args)
{
    gpurdma::algo::Call call;
    const gpurdma_status_t checked = check_call(comm, args, &call);
    if (checked != GPURDMA_OK) return checked;
    return guarded(comm, "planning the collective", [&] { return comm->run(call); });
}

gpurdma_status_t gpurdma_icollective(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args,
                                     gpurdma_complete_fn_t complete, void *arg, gpurdma_request_t **request)
{
    return create_request(gpurdma_request::Kind::Nonblocking, comm, args, complete, arg, request);
}

gpurdma_status_t gpurdma_collective_init(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args,
                                         gpurdma_complete_fn_t complete, void *arg, gpurdma_request_t **request)
{
    return create_request(gpurdma_request::Kind::Persistent, comm, args, complete, arg, request);
}

gpurdma_status_t gpurdma_allreduce(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gpurdma_dtype_t dtype, gpurdma_op_t op)
{
    const gpurdma_coll_args_t args = allreduce_args(sendbuf, recvbuf, count, dtype, op);
    return gpurdma_collective(comm, &args);
}

gpurdma_status_t gpurdma_iallreduce(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                    gpurdma_dtype_t dtype, gpurdma_op_t op, gpurdma_complete_fn_t complete, void *arg,
                                    gpurdma_request_t **request)
{
    const gpurdma_coll_args_t args = allreduce_args(sendbuf, recvbuf, count, dtype, op);
    return gpurdma_icollective(comm, &args, complete, arg, request);
}

gpurdma_status_t gpurdma_allreduce_init(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                        gpurdma_dtype_t dtype, gpurdma_op_t op, gpurdma_complete_fn_t complete,
                                        void *arg, gpurdma_request_t **request)
{
    const gpurdma_coll_args_t args = allreduce_args(sendbuf, recvbuf, count, dtype, op);
    return gpurdma_collective_init(comm, &args, complete, arg, request);
}

gpurdma_status_t gpurdma_barrier(gpurdma_comm_t *comm)
{
    if (!comm) return GPURDMA_ERR_INVALID;
    return guarded(comm, "in a barrier", [&] { return comm->run(barrier_call(comm)); });
}

gpurdma_status_t gpurdma_ibarrier(gpurdma_comm_t *comm, gpurdma_complete_fn_t complete, void *arg,
                                  gpurdma_request_t **request)
{
    return create_barrier(gpurdma_request::Kind::Nonblocking, comm, complete, arg, request);
}

gpurdma_status_t gpurdma_barrier_init(gpurdma_comm_t *comm, gpurdma_complete_fn_t complete, void *arg,
                                      gpurdma_request_t **request)
{
    return create_barrier(gpurdma_request::Kind::Persistent, comm, complete, arg, request);
}

const char *gpurdma_coll_name(gpurdma_coll_t coll)
{
    static const char *const names[] = {"allreduce", "reduce_scatter", "allgather", "bcast", "reduce"};
    return static_cast<unsigned>(coll) < GPURDMA_COLL_COUNT ? names[coll] : "?";
}

gpurdma_status_t gpurdma_request_start(gpurdma_request_t *request)
{
    if (!request || !request->comm) return GPURDMA_ERR_INVALID;
    return guarded(request->comm, "starting a persistent collective", [&] { return request->comm->start(*request); });
}

int gpurdma_request_test(gpurdma_request_t *request)
{
    if (!request || !request->comm) return 1;
    try {
        return request->comm->test(*request);
    } catch (const std::exception &) {
        return 0;
    }
}

int gpurdma_request_free(gpurdma_request_t *request)
{
    if (!request) return 0;
    if (!request->comm) {  // orphaned: its communicator is gone
        delete request;
        return 0;
    }
    return request->comm->release(request);
}

int gpurdma_is_device_memory(const void *ptr)
{
    const auto kind = gpurdma::gpu::GpuRuntime::instance().query(ptr).kind;
    return kind == gpurdma::gpu::MemoryKind::Device || kind == gpurdma::gpu::MemoryKind::OtherVendor;
}

gpurdma_status_t gpurdma_memcpy(void *dst, const void *src, size_t bytes)
{
    const auto &gpu = gpurdma::gpu::GpuRuntime::instance();
    const auto d = gpu.query(dst), s = gpu.query(src);
    using gpurdma::gpu::MemoryKind;
    try {
        if (d.kind == MemoryKind::OtherVendor || s.kind == MemoryKind::OtherVendor) {
            // The other vendor's runtime copies its memory; one of ours on the other side
            // goes through a host bounce buffer (no runtime addresses both).
            if (d.kind != MemoryKind::Device && s.kind != MemoryKind::Device)
                return gpu.copy_other_vendor(dst, src, bytes).is_ok() ? GPURDMA_OK : GPURDMA_ERR_TRANSPORT;
            std::vector<char> bounce(bytes);
            const bool ok = s.kind == MemoryKind::Device ? gpu.copy(bounce.data(), src, bytes, s.context).is_ok() &&
                                                               gpu.copy_other_vendor(dst, bounce.data(), bytes).is_ok()
                                                         : gpu.copy_other_vendor(bounce.data(), src, bytes).is_ok() &&
                                                               gpu.copy(dst, bounce.data(), bytes, d.context).is_ok();
            return ok ? GPURDMA_OK : GPURDMA_ERR_TRANSPORT;
        }
        if (d.kind != MemoryKind::Device && s.kind != MemoryKind::Device) {
            std::memmove(dst, src, bytes);
            return GPURDMA_OK;
        }
        return gpu.copy(dst, src, bytes, d.context ? d.context : s.context).is_ok() ? GPURDMA_OK
                                                                                    : GPURDMA_ERR_TRANSPORT;
    } catch (const std::bad_alloc &) {
        return GPURDMA_ERR_NO_RESOURCE;
    }
}

const char *gpurdma_comm_last_error(const gpurdma_comm_t *comm)
{
    return comm ? comm->last_error.c_str() : "";
}

int gpurdma_comm_is_set_up(const gpurdma_comm_t *comm)
{
    return comm && comm->set_up() ? 1 : 0;
}

void gpurdma_context_get_stats(const gpurdma_context_t *context, gpurdma_comm_stats_t *stats)
{
    if (context && stats) *stats = context->read_totals();
}

void gpurdma_comm_get_stats(const gpurdma_comm_t *comm, gpurdma_comm_stats_t *stats)
{
    if (comm && stats) *stats = gpurdma::counters::snapshot(comm->stats);  // any thread, while the engine counts
}

}  // extern "C"
