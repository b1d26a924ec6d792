// gpurdma's own schedules as the fabric model's input: the steps the planner builds for
// the stage between nodes, on one rail plane (the owners of one slice, one per node), as
// a DAG of RDMA WRITEs the way the executor issues them (src/exec/executor.h), with the
// node stages of each rail unit as local delays on lanes of their own (the GPU path's
// streams: unit k+1's node reduce-scatter overlaps unit k's rail):
//  - a rank runs its steps in order; a send is posted once the steps before it are done
//    and a landing slot at the receiver is free: the k-th message to a peer waits for the
//    credit that peer returned for message k - rail_slots (receiver-driven admission);
//  - a receive is done when its message has arrived and been reduced (reduce_gbps), and
//    only then goes the credit back (a small write on a QP of its own).
// Local steps appear as zero-byte messages from a host to itself (off the wire).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cluster_spec.h"
#include "fabric_model.h"
#include "plan/planner.h"
#include "topo/topology.h"

namespace gpurdma::fabric {

// A setting of the component's stage between nodes, as the model runs it: the
// hierarchical schedule's rail units (plan/rail_choice.h) with
// coll_gpurdma_rail_algorithm and coll_gpurdma_rail_unit; the chunk and the puts in
// flight per peer are the run's own. Every setting is one the component runs.
struct RailPlan {
    plan::Algorithm algorithm = plan::Algorithm::Auto;  // Auto, Ring, RecursiveDoubling, HalvingDoubling
    size_t unit = 0;  // bytes of a slice per unit: 0 the planner's choice, kWholeSlice one unit
    std::string name() const;  // "hier" (the planner's), "rhd/slice", "ring/1 MiB", ...
};
constexpr size_t kWholeSlice = SIZE_MAX;
// "hier" (auto/auto), "ring" (ring/slice), "rhd" (rhd/slice), "hier-rd" (rd/chunk), or
// ALGORITHM/UNIT with ALGORITHM auto, ring, rd or rhd and UNIT auto, chunk, slice or a
// size (256K, 4M); chunk is the run's chunk size.
bool parse_rail_plan(const std::string &text, RailPlan *out);

enum class MessageKind { Data, Credit, Local };

struct ScheduleDag {
    std::vector<Message> messages;  // MessageId = index
    std::vector<MessageKind> kinds;
    std::vector<int> step_of;  // the schedule step (of its rank) each message belongs to
    std::vector<MessageId> last;  // per plane host: its final step's message
    size_t slice_bytes = 0;  // what one rail plane allreduces
    int steps = 0;  // the most steps any plane rank runs
    size_t data_messages = 0;
    std::string describe;  // "ring, 254 steps of ..." for the report
};

// The DAG of rail plane 0 for an allreduce of `bytes` (float elements) on `spec`, chunks of
// `chunk` bytes, `rail_slots` puts in flight per peer. Node i's plane host is
// host_base + spec.host_of_index()[i] * host_stride (a second job placed between the first's hosts); tags are
// the step numbers plus tag_base.
ScheduleDag build_rail_dag(const ClusterSpec &spec, const RailPlan &rail, size_t bytes, size_t chunk, int rail_slots,
                           int host_base = 0, int host_stride = 1, int tag_base = 0);

// gpurdma's plan parameters on this cluster: chunk_size, the rail's window (rail_slots),
// unit and algorithm (a unit of kWholeSlice: the slice of `bytes`), and the cost model as
// coll_gpurdma_calibrate would measure it (net: four link traversals and 2 us of
// software per message at the NIC's rate; node stages: the cluster's nvlink_gbps).
plan::PlanParams planner_params(const ClusterSpec &spec, size_t chunk, int rail_slots = 4, const RailPlan &rail = {},
                                size_t bytes = 0);
// The planner's unit for this message (bytes of a slice), and its algorithm for a unit.
size_t planned_unit_bytes(const ClusterSpec &spec, const plan::PlanParams &params, size_t bytes);
// The whole communicator's (nodes x GPUs) topology as gpurdma sees it.
topo::Topology cluster_topology(const ClusterSpec &spec);

// The bandwidth bound of one plane: 2(n-1)/n x slice / rail bandwidth, in microseconds.
double ideal_us(const ClusterSpec &spec, size_t bytes);

}  // namespace gpurdma::fabric
