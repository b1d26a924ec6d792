// The communicator's flight record beyond the calls' own notes: what a call is (filled
// from its request), the per-stage counters of a finished call, the trace's clock
// alignment at set-up and the trace written at the communicator's free.
#include "algo/call_spans.h"
#include "algo/host_team.h"
#include "core/comm.h"
#include "obs/clock_alignment.h"
#include "obs/ticks.h"
#include "obs/trace_writer.h"
#include "plan/schedule.h"
#include "reduce/reduce.h"

void gpurdma_comm::fill_record(const void *source, gpurdma::obs::CallRecord *rec)
{
    const gpurdma_request &r = *static_cast<const gpurdma_request *>(source);
    rec->coll = static_cast<uint8_t>(r.call.coll);
    rec->count = r.call.count;
    rec->bytes = gpurdma::algo::total_count(r.call, r.comm->size) * gpurdma::reduce::dtype_size(r.call.dtype);
    rec->dtype = static_cast<uint8_t>(r.call.dtype);
    rec->op = static_cast<uint8_t>(r.call.op);
    const bool rooted = r.call.coll == gpurdma::plan::Coll::Bcast || r.call.coll == gpurdma::plan::Coll::Reduce;
    rec->root = rooted ? r.call.root : -1;
    rec->kind = static_cast<uint8_t>(r.kind);
    rec->barrier = r.call.barrier;
    rec->path = static_cast<uint8_t>(r.device ? gpurdma::obs::RecorderPath::Device : gpurdma::obs::RecorderPath::Host);
}

void gpurdma_comm::tally_stages(const gpurdma::obs::CallRecord &record)
{
    using gpurdma::plan::Phase;
    using Field = uint64_t gpurdma_comm_stats_t::*;
    const double us_per_tick = gpurdma::obs::TickClock::process().seconds_per_tick() * 1e6;
    for (int i = 0; i < record.stages && i < gpurdma::obs::CallRecord::kStages; ++i) {
        const gpurdma::obs::StageSpan &s = record.stage[i];
        Field time = nullptr, sent = nullptr;
        switch (static_cast<Phase>(s.phase)) {
            case Phase::NodeReduceScatter:
                time = &gpurdma_comm_stats_t::stage_node_reduce_scatter_us;
                sent = &gpurdma_comm_stats_t::stage_node_reduce_scatter_bytes;
                break;
            case Phase::NodeAllgather:
                time = &gpurdma_comm_stats_t::stage_node_allgather_us;
                sent = &gpurdma_comm_stats_t::stage_node_allgather_bytes;
                break;
            case Phase::StageOut:
            case Phase::StageBack: time = &gpurdma_comm_stats_t::stage_gpu_copy_us; break;
            case Phase::Local:
            case Phase::Calibration: break;
            default: time = &gpurdma_comm_stats_t::stage_rail_us; sent = &gpurdma_comm_stats_t::stage_rail_bytes;
        }
        if (time && s.end > s.begin)
            tally(time, static_cast<uint64_t>(static_cast<double>(s.end - s.begin) * us_per_tick));
        if (sent && s.bytes) tally(sent, s.bytes);
    }
}

void gpurdma_comm::set_up_record()
{
    recorder_.set_hosts(team_->hosts());
    if (context->trace_dir.empty()) return;
    // Every rank alike (trace_dir is agreed, recorder_size is not): the trace's clocks,
    // against rank 0's.
    const gpurdma::obs::ClockAlignment clock =
        gpurdma::obs::align_clock(rank, size, [this](const void *send, void *recv, size_t bytes) {
            return bootstrap.allgather(send, recv, bytes, bootstrap.arg) == 0;
        });
    if (clock.measured) recorder_.set_clock(clock.offset_s, clock.error_s, clock.epoch_s);
}

void gpurdma_comm::trace_record()
{
    if (size < 2 || context->trace_dir.empty() || calls_begun_ == 0) return;
    std::string why;
    if (gpurdma::obs::write_trace(context->trace_dir, recorder_, &why).empty())
        context->log.log(1, "%s: no trace written: %s", name.c_str(), why.c_str());
}
