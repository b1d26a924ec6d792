#include "plan/device_unit.h"

namespace gpurdma::plan {

namespace {

Step local(StepKind kind, Phase phase, Buf dst, size_t dst_off, Buf src, size_t src_off, size_t bytes)
{
    return Step{kind, phase, false, -1, dst, src, dst_off, src_off, bytes};
}

}  // namespace

Schedule build_device_unit(const Schedule &rail, const DeviceUnit &unit, UnitSpan *span)
{
    Schedule s;
    s.algorithm = Algorithm::Hierarchical;
    s.rank = rail.rank;
    s.size = rail.size;
    s.bytes = unit.bytes;
    s.elem_size = rail.elem_size;
    const size_t at = unit.first_byte;
    // The unit's reduced span: in the receive buffer after a node reduce, else this
    // rank's own send buffer (a node of one).
    Buf reduced = Buf::Recv;
    if (unit.node_reduce)
        s.steps.push_back(
            local(StepKind::NodeReduce, Phase::NodeReduceScatter, Buf::Recv, at, Buf::Node, at, unit.bytes));
    else if (!unit.in_place) reduced = Buf::Send;
    if (unit.stage_on_host) {
        s.steps.push_back(local(StepKind::Copy, Phase::StageOut, Buf::Stage, 0, reduced, at, unit.bytes));
    } else if (reduced == Buf::Send) {
        s.steps.push_back(local(StepKind::Copy, Phase::NodeReduceScatter, Buf::Recv, at, Buf::Send, at, unit.bytes));
    }
    span->rail_begin = s.steps.size();
    for (Step step : rail.steps) {
        // The rail runs in place on Recv from 0: on the staging buffer as it is, or on
        // the unit's span of the receive buffer.
        if (unit.stage_on_host) {
            if (step.dst_buf == Buf::Recv) step.dst_buf = Buf::Stage;
            if (step.src_buf == Buf::Recv) step.src_buf = Buf::Stage;
        } else {
            if (step.kind != StepKind::Send) step.dst_off += at;
            if (step.kind != StepKind::RecvCopy) step.src_off += at;
        }
        s.steps.push_back(step);
    }
    span->rail_end = s.steps.size();
    if (unit.stage_on_host)
        s.steps.push_back(local(StepKind::Copy, Phase::StageBack, Buf::Recv, at, Buf::Stage, 0, unit.bytes));
    return s;
}

}  // namespace gpurdma::plan
