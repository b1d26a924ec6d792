#include "gpu/default_streams.h"

#include <string>

namespace gpurdma::gpu {

namespace {

// cuda.h's CU_STREAM_LEGACY and CU_STREAM_PER_THREAD handles.
const CUstream kLegacyStream = reinterpret_cast<CUstream>(0x1);
const CUstream kPerThreadStream = reinterpret_cast<CUstream>(0x2);

const char *stream_name(bool legacy)
{
    return legacy ? "the application's legacy default stream" : "the caller's per-thread default stream";
}

// Runs `each` on the distinct non-null contexts among a call's two buffers' (receive first).
template <class Each> Status for_each_context(CUcontext send_context, CUcontext recv_context, Each each)
{
    if (recv_context) {
        const Status st = each(recv_context);
        if (!st.is_ok()) return st;
    }
    if (send_context && send_context != recv_context) return each(send_context);
    return Status::ok();
}

Status settle(CUcontext ctx)
{
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx);
    for (CUstream stream : {kLegacyStream, kPerThreadStream}) {
        const CUresult rc = d.api().stream_synchronize(stream);
        if (rc != 0)
            return d.failure(
                ("cuStreamSynchronize (" + std::string(stream_name(stream == kLegacyStream)) + ")").c_str(), rc);
    }
    return Status::ok();
}

// The same wait on the host (drivers without events).
Status settle_default_streams(CUcontext send_context, CUcontext recv_context)
{
    const auto &d = GpuRuntime::instance();
    if (!d.available() || !d.api().stream_synchronize) return Status::ok();  // no GPU buffers then
    return for_each_context(send_context, recv_context, settle);
}

}  // namespace

DefaultStreamFence::~DefaultStreamFence()
{
    const auto &d = GpuRuntime::instance();
    for (const Mark &m : marks_) {
        ContextScope scope(m.ctx);
        d.api().event_destroy(m.event);
    }
}

Status DefaultStreamFence::record(CUcontext send_context, CUcontext recv_context)
{
    const auto &d = GpuRuntime::instance();
    if (!d.available()) return Status::ok();
    const auto &a = d.api();
    if (!a.event_create || !a.event_record || !a.event_query || !a.event_destroy)
        return settle_default_streams(send_context, recv_context);
    for (Mark &m : marks_) m.reached = true;  // only this start's contexts are waited for
    return for_each_context(send_context, recv_context, [this](CUcontext ctx) { return record_in(ctx); });
}

Status DefaultStreamFence::record_in(CUcontext ctx)
{
    const auto &d = GpuRuntime::instance();
    ContextScope scope(ctx);
    for (bool legacy : {true, false}) {
        Mark *mark = nullptr;
        for (Mark &m : marks_)
            if (m.ctx == ctx && m.legacy == legacy) mark = &m;
        if (!mark) {
            CUevent event = nullptr;
            const CUresult rc = d.api().event_create(&event, kEventDisableTiming);
            if (rc != 0) return d.failure("cuEventCreate", rc);
            marks_.push_back(Mark{ctx, legacy, event, true});
            mark = &marks_.back();
        }
        const CUresult rc = d.api().event_record(mark->event, legacy ? kLegacyStream : kPerThreadStream);
        if (rc != 0) return d.failure(("cuEventRecord on " + std::string(stream_name(legacy))).c_str(), rc);
        mark->reached = false;
    }
    return Status::ok();
}

Status DefaultStreamFence::reached(bool *done)
{
    const auto &d = GpuRuntime::instance();
    *done = true;
    for (Mark &m : marks_) {
        if (m.reached) continue;
        ContextScope scope(m.ctx);
        const CUresult rc = d.api().event_query(m.event);
        if (rc == kErrorNotReady) {
            *done = false;
            return Status::ok();
        }
        if (rc != 0) return d.failure(("cuEventQuery on " + std::string(stream_name(m.legacy))).c_str(), rc);
        m.reached = true;
    }
    return Status::ok();
}

}  // namespace gpurdma::gpu
