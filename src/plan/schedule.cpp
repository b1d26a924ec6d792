#include "plan/schedule.h"

namespace gpurdma::plan {

const char *phase_name(Phase phase)
{
    switch (phase) {
        case Phase::Local: return "local copy";
        case Phase::RingReduceScatter: return "ring reduce-scatter";
        case Phase::RingAllgather: return "ring allgather";
        case Phase::RdFoldIn: return "recursive-doubling fold-in";
        case Phase::RdExchange: return "recursive-doubling exchange";
        case Phase::RdFoldOut: return "recursive-doubling fold-out";
        case Phase::NodeReduceScatter: return "node reduce-scatter";
        case Phase::NodeAllgather: return "node allgather";
        case Phase::Calibration: return "cost-model calibration";
        case Phase::StageOut: return "copy to host";
        case Phase::StageBack: return "copy back to the GPU";
        case Phase::TreeBcast: return "tree bcast";
        case Phase::TreeReduce: return "tree reduce";
        case Phase::HalvingReduceScatter: return "recursive-halving reduce-scatter";
        case Phase::DoublingAllgather: return "recursive-doubling allgather";
    }
    return "unknown";
}

const char *step_kind_name(StepKind kind)
{
    switch (kind) {
        case StepKind::Copy: return "copy";
        case StepKind::Send: return "send";
        case StepKind::RecvReduce: return "receive-reduce";
        case StepKind::RecvCopy: return "receive";
        case StepKind::NodeReduce: return "node reduce";
    }
    return "unknown";
}

}  // namespace gpurdma::plan
