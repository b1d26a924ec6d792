// gpurdma's own schedules as the fabric model's input: the steps the planner builds for
// the stage between nodes, on one rail plane (the owners of one slice, one per node), as
// a DAG of RDMA WRITEs the way the executor issues them (src/exec/executor.h):
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

enum class RailAlgorithm {
    Hierarchical,  // what gpurdma runs: the hierarchical schedule's rail stage, block by block (plan/rail.h)
    HierarchicalRd,  // the same units, each by recursive doubling (one unit fits a slot): a what-if
    Ring,  // one ring allreduce of the whole slice between nodes, pipelined in chunks
    RecursiveDoubling,  // recursive doubling of the whole slice between nodes
};
const char *rail_algorithm_name(RailAlgorithm a);
bool parse_rail_algorithm(const std::string &name, RailAlgorithm *out);

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
// host_base + spec.host_of_node()[i] * host_stride (a second job placed between the first's hosts); tags are
// the step numbers plus tag_base.
ScheduleDag build_rail_dag(const ClusterSpec &spec, RailAlgorithm algorithm, size_t bytes, size_t chunk, int rail_slots,
                           int host_base = 0, int host_stride = 1, int tag_base = 0);

// gpurdma's plan parameters on this cluster: chunk_size, and the cost model as
// coll_gpurdma_calibrate would measure it (net: four link traversals and 2 us of software
// per message at the NIC's rate; node stage: an NVLink-class 1 us + 150 GB/s).
plan::PlanParams planner_params(const ClusterSpec &spec, size_t chunk);
// The whole communicator's (nodes x GPUs) topology as gpurdma sees it.
topo::Topology cluster_topology(const ClusterSpec &spec);

// The bandwidth bound of one plane: 2(n-1)/n x slice / rail bandwidth, in microseconds.
double ideal_us(const ClusterSpec &spec, size_t bytes);

}  // namespace gpurdma::fabric
