// The parameter table, its C API, and the set-up agreement it drives.
#include "core/params.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "plan/algorithms.h"
#include "plan/cost_model.h"

namespace gpurdma::params {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr size_t kMiB = size_t{1} << 20;
constexpr int kAllRanks = 1;  // the row's `agreed`: checked at every communicator's set-up
constexpr int kLocal = 0;
constexpr plan::CostModel kModel{};

// What a number may be; `complaint` is what the warning says of a value outside.
struct Range {
    double min = -kInfinity, max = kInfinity;
    int min_excluded = 0;
    size_t multiple_of = 0;
    const char *complaint = nullptr;
};
constexpr Range any_number()
{
    return Range{};
}
constexpr Range in(double min, double max, const char *complaint)
{
    return Range{min, max, 0, 0, complaint};
}
constexpr Range above(double min, double max, const char *complaint)
{
    return Range{min, max, 1, 0, complaint};
}
constexpr Range multiple_in(size_t m, double min, double max, const char *complaint)
{
    return Range{min, max, 0, m, complaint};
}

// One builder per kind of row. Each lists gpurdma_param_info_t's fields in their order:
// name, type, offset, default_number, default_text, min, max, min_excluded, multiple_of,
// text_valid, value_name, complaint, info_level, agreed, help.
constexpr gpurdma_param_info_t number(const char *name, gpurdma_param_type_t type, size_t offset, double value, Range r,
                                      int agreed, int level, const char *help)
{
    return {name,          type,    offset,  value,       nullptr, r.min,  r.max, r.min_excluded,
            r.multiple_of, nullptr, nullptr, r.complaint, level,   agreed, help};
}

constexpr gpurdma_param_info_t text(const char *name, size_t offset, const char *value, int (*valid)(const char *),
                                    const char *complaint, int agreed, int level, const char *help)
{
    return {name, GPURDMA_PARAM_STRING, offset, 0, value, 0, 0, 0, 0, valid, nullptr, complaint, level, agreed, help};
}

constexpr gpurdma_param_info_t choice(const char *name, size_t offset, const char *value, const char *(*names)(int),
                                      int agreed, int level, const char *help)
{
    return {name, GPURDMA_PARAM_ENUM, offset, 0, value, 0, 0, 0, 0, nullptr, names, nullptr, level, agreed, help};
}

// coll_gpurdma_rail_algorithm's values (plan/rail_choice.h), in MCA enumerator order:
// spellings plan::parse_algorithm takes.
const char *rail_algorithm_name(int index)
{
    static const char *const names[] = {"auto", "ring", "rd", "rhd"};
    return index >= 0 && index < 4 ? names[index] : nullptr;
}

// coll_gpurdma_rail_reduce's values (gpu/rail_mode.h), in MCA enumerator order.
const char *rail_reduce_name(int index)
{
    static const char *const names[] = {"auto", "host", "device"};
    return index >= 0 && index < 3 ? names[index] : nullptr;
}

#define FIELD(f) offsetof(gpurdma_config_t, f)
constexpr auto INT = GPURDMA_PARAM_INT;
constexpr auto SIZE = GPURDMA_PARAM_SIZE;
constexpr auto DOUBLE = GPURDMA_PARAM_DOUBLE;

// In the order ompi_info lists them. Help texts are what ompi_info prints.
const gpurdma_param_info_t kTable[] = {
    number("verbose", INT, FIELD(verbose), 0, any_number(), kLocal, 6,
           "0 silent; 1 one line per communicator (what was chosen and why) and warnings; "
           "2 one line per call and per fallback (GPU buffers across nodes: per-stage times); 3 each "
           "slice's timeline on that path"),
    number("chunk_size", SIZE, FIELD(chunk_size), 256 * 1024,
           multiple_in(64, 4096, 64 * kMiB, "is not a multiple of 64 in 4096..64 MiB"), kAllRanks, 7,
           "Pipeline chunk and landing-slot size in bytes (4096 .. 64 MiB)"),
    number("slots", INT, FIELD(slots), 4, in(1, 64, "is not in 1..64"), kAllRanks, 7,
           "Landing slots per peer channel, i.e. pipeline depth (1 .. 64)"),
    number("rail_qps", INT, FIELD(rail_qps), 0, in(0, 16, "is not in 0..16"), kLocal, 6,
           "Endpoints per inter-node peer (on an RDMA NIC, separate QPs): a peer's messages are striped over them "
           "slot by slot, so that the fabric's ECMP hashes them onto different spine links instead of one. 0 "
           "(automatic): 1 where all ranks are on one host, else 2 (gpurdma-fabric, 128 x 8, a scheduler's "
           "scattered placement, 64 MiB: with the nodes in rank order 2 QPs take the allreduce from 4.4-6.3x to "
           "2.3-2.6x the bound; in fabric order they cost 1.24x -> 1.34x alone but keep a second job's traffic "
           "from drawing PFC pauses; docs/FABRIC.md). At most coll_gpurdma_rail_slots"),
    number("rail_slots", INT, FIELD(rail_slots), 0, in(0, 64, "is not in 0..64"), kAllRanks, 7,
           "Landing slots per inter-node peer (UCX channels): how many puts a rail may have in flight "
           "to one peer before that receiver hands a slot back (receiver-driven admission; 1 .. 64). "
           "0 (auto): 2 on 8 nodes or more where the rail's writes (about chunk_size / nodes) are 128 "
           "KiB or more, else coll_gpurdma_slots (never more than that): what the fabric model found "
           "best (docs/FABRIC.md)"),
    number("node_chunk_size", SIZE, FIELD(node_chunk_size), 256 * 1024,
           multiple_in(64, 4096, 64 * kMiB, "is not a multiple of 64 in 4096..64 MiB"), kAllRanks, 7,
           "Block size in bytes of the one-node shared-memory allreduce (4096 .. 64 MiB, a "
           "multiple of 64): the pipeline unit of its copy-in, reduce and copy-out"),
    // Above the largest chunk it could never apply (recursive doubling needs one slot); a
    // negative value given on the command line arrives as a huge size_t.
    number("small_msg_max", SIZE, FIELD(small_msg_max), 64 * 1024, in(0, 64 * kMiB, "is not in 0..64 MiB"), kAllRanks,
           7,
           "Largest message in bytes for the latency path: the direct node allreduce and reduce "
           "(one wait; with two ranks on the node, every size) and recursive doubling between nodes; "
           "0 turns it off"),
    number("device_stage_max", SIZE, FIELD(device_stage_max), 32 * 1024, in(0, 64 * kMiB, "is not in 0..64 MiB"),
           kAllRanks, 7,
           "GPU buffers on one node (across nodes: every collective but allreduce): calls of up to this many bytes "
           "(the whole vector: a reduce-scatter's "
           "input, an allgather's result) are copied to page-locked host memory, run by the host path and "
           "copied back, instead of the device path (node barriers, kernels, copies over CUDA IPC). The "
           "default matches the allreduce crossover measured on one H200 shared by 2 and 4 processes under "
           "MPS; 0: every size takes the device path"),
    number("timeout", DOUBLE, FIELD(timeout_s), 60.0, above(0, 86400, "is not in (0, 86400]"), kLocal, 6,
           "Seconds a collective waits on a peer before it fails with an error naming the "
           "stage and the peer"),
    number("barrier_timeout", DOUBLE, FIELD(barrier_timeout_s), 3600.0, above(0, 86400, "is not in (0, 86400]"), kLocal,
           6,
           "Seconds MPI_Barrier (any form) waits for its peers before it fails with an error naming the peer: "
           "longer than coll_gpurdma_timeout, because a barrier waits for the application's slowest rank, "
           "which may compute or write for minutes while the others wait there"),
    number("reduce_scatter_enable", INT, FIELD(reduce_scatter_enable), 1, in(0, 1, "is not 0 or 1"), kAllRanks, 5,
           "1: MPI_Reduce_scatter_block and MPI_Reduce_scatter (blocking, nonblocking, persistent) run in "
           "gpurdma; 0: they go to the previous module (every rank must agree)"),
    number("allgather_enable", INT, FIELD(allgather_enable), 1, in(0, 1, "is not 0 or 1"), kAllRanks, 5,
           "1: MPI_Allgather (blocking, nonblocking, persistent) runs in gpurdma; 0: the previous module's"),
    number("bcast_enable", INT, FIELD(bcast_enable), 1, in(0, 1, "is not 0 or 1"), kAllRanks, 5,
           "1: MPI_Bcast (blocking, nonblocking, persistent) runs in gpurdma; 0: the previous module's"),
    number("reduce_enable", INT, FIELD(reduce_enable), 1, in(0, 1, "is not 0 or 1"), kAllRanks, 5,
           "1: MPI_Reduce (blocking, nonblocking, persistent) runs in gpurdma; 0: the previous module's"),
    number("barrier_enable", INT, FIELD(barrier_enable), 1, in(0, 1, "is not 0 or 1"), kAllRanks, 5,
           "1: MPI_Barrier (blocking, nonblocking, persistent) runs in gpurdma, as a one-byte allreduce on "
           "the allreduce's paths; 0: the previous module's"),
    number("progress_thread", INT, FIELD(progress_thread), 0, in(0, 1, "is not 0 or 1"), kLocal, 6,
           "1: a thread of gpurdma's advances MPI_Iallreduce and persistent allreduce calls while the "
           "application computes between MPI calls (started by the first such call; it polls while calls are in "
           "flight, pausing 20 us whenever nothing moved, and sleeps otherwise; it never calls MPI: completions "
           "are reported by the next MPI call). It buys overlap (about 50% at np=2, 30-45% at np=4 from "
           "256 KiB) at the cost of the calls' own time (about 2x when the application waits at once). 0: those "
           "calls move only inside MPI calls, as libnbc's"),
    number("progress_thread_pause_us", DOUBLE, FIELD(progress_thread_pause_us), 20.0, in(0, 1e6, "is not in [0, 1e6]"),
           kLocal, 9,
           "With progress_thread: microseconds the thread pauses when a poll of the calls in flight moved "
           "nothing, so that the application's thread on the same core keeps most of it while a multi-step call "
           "still advances every few tens of microseconds"),
    number("progress_thread_grace_us", DOUBLE, FIELD(progress_thread_grace_us), 100.0, in(0, 1e6, "is not in [0, 1e6]"),
           kLocal, 9,
           "With progress_thread: while an MPI thread polls (MPI_Wait, MPI_Test) and for this many microseconds "
           "after, the thread sleeps instead of competing for the core and the engine; once the application "
           "computes again it takes over within this"),
    number("progress_thread_linger_us", DOUBLE, FIELD(progress_thread_linger_us), 2000.0,
           in(0, 1e7, "is not in [0, 1e7]"), kLocal, 9,
           "With progress_thread: microseconds the thread keeps checking on a timer after the last call in flight "
           "ended, before it sleeps until woken, so that back-to-back calls cost their MPI thread no wake-up each"),
    number("spin_us", DOUBLE, FIELD(spin_us), 20.0, in(-kInfinity, 1e6, "is over 1 s"), kLocal, 7,
           "Microseconds a rank waits for a peer by spinning before it starts yielding its core "
           "(sched_yield) for the rest of that wait: a longer wait means the peer is not running, e.g. other "
           "hosts' or jobs' processes share the cores. Negative: spin until done. Where a host's ranks cannot "
           "each have a CPU of their own (decided from every rank's affinity mask, the job's processes on the host "
           "and cgroup limits) they always yield"),
    // The cost model divides by the bandwidths: NaN or 0 would make every comparison false.
    number("net_alpha_us", DOUBLE, FIELD(net_alpha_us), kModel.net.alpha_us, in(0, 1e6, "is not in [0, 1e6]"),
           kAllRanks, 7,
           "Cost model: microseconds per message between nodes (auto chooses the algorithm "
           "with the least estimated time; the model and its choices print at verbose 1)"),
    number("net_gbps", DOUBLE, FIELD(net_gbps), kModel.net.gbps, in(1e-6, 1e6, "is not in [1e-06, 1e6]"), kAllRanks, 7,
           "Cost model: bandwidth between nodes in GB/s"),
    number("shm_alpha_us", DOUBLE, FIELD(shm_alpha_us), kModel.shm.alpha_us, in(0, 1e6, "is not in [0, 1e6]"),
           kAllRanks, 7, "Cost model: microseconds per message between ranks of one node"),
    number("shm_gbps", DOUBLE, FIELD(shm_gbps), kModel.shm.gbps, in(1e-6, 1e6, "is not in [1e-06, 1e6]"), kAllRanks, 7,
           "Cost model: bandwidth between ranks of one node in GB/s"),
    number("calibrate", INT, FIELD(calibrate), 0, in(0, 1, "is not 0 or 1"), kAllRanks, 7,
           "1: each communicator that spans nodes measures the cost model at set-up (ping-pong of 8 B and "
           "64 KiB between rank 0 and a rank on another node and one on its own node, and a float sum), a few ms, "
           "and every rank uses rank 0's numbers; 0: the *_alpha_us / *_gbps parameters"),
    number("reduce_gbps", DOUBLE, FIELD(reduce_gbps), kModel.reduce_gbps, in(1e-6, 1e6, "is not in [1e-06, 1e6]"),
           kAllRanks, 7, "Cost model: speed of a reduction in GB/s of input"),
    choice("algorithm", FIELD(algorithm), "auto", gpurdma_algorithm_name, kAllRanks, 6,
           "Allreduce algorithm: auto (by message size and topology), node (one-node shared-memory "
           "reduce-scatter/allgather; auto's choice when all ranks share a node), ring, rd (recursive "
           "doubling, messages up to chunk_size), hier (node reduce-scatter, per-rail allreduce between "
           "nodes, node allgather), rhd (Rabenseifner's halving-doubling over all ranks)"),
    number("rail_unit", SIZE, FIELD(rail_unit), 0, in(0, 1024.0 * kMiB, "is not in 0..1 GiB"), kAllRanks, 7,
           "Bytes of a slice per unit of the hierarchical schedule's stage between nodes (each unit is "
           "allreduced among the nodes at once, streamed through the landing slots in chunk_size pieces; GPU "
           "buffers staged through page-locked memory take one unit per staging buffer). 0 (auto): one chunk "
           "below 8 nodes; from 8 nodes the cost model's choice of 1, 2, 4, ... chunks or the whole slice, "
           "the least estimated time of the three-stage pipeline (the larger unit of two within 2%) "
           "(docs/FABRIC.md)"),
    choice("rail_algorithm", FIELD(rail_algorithm), "auto", rail_algorithm_name, kAllRanks, 7,
           "The algorithm of each unit of the hierarchical schedule's stage between nodes: auto (the cost "
           "model's cheapest: rd where the unit fits one landing slot and small_msg_max, else the ring or rhd), "
           "ring, rd (recursive doubling; rhd for units over one slot), rhd (Rabenseifner's recursive-halving "
           "reduce-scatter and recursive-doubling allgather, the nearest nodes first)"),
    number("shm_arena_size", SIZE, FIELD(shm_arena_size), 4096.0 * kMiB, in(0, 1048576.0 * kMiB, "is not in 0..1 TiB"),
           kLocal, 7,
           "Bytes of node shared memory this process hands out to the communicators it leads on its node (it is "
           "their first rank there): slices of one sparse memory file per process, mapped once by its node peers "
           "(through /proc/<pid>/fd), so a new communicator costs no file, mapping or page; pages come as calls "
           "touch them, and a freed communicator's slice is reused. A communicator that does not fit declines "
           "(one verbose line) and runs on the previous module. 0: a named /dev/shm segment per communicator, "
           "reserved in full at set-up (for ranks that cannot see each other's /proc)"),
    text("ucx_tls", FIELD(ucx_tls), "", nullptr, nullptr, kLocal, 7,
         "UCX transports for gpurdma's own UCX context (empty: UCX_TLS or UCX's default)"),
    // Checked by the core when the context starts (topo::logical_node), one warning per host.
    text("logical_nodes", FIELD(logical_nodes), "", nullptr, nullptr, kAllRanks, 7,
         "Split each host into virtual nodes, for testing the hierarchical path on one "
         "machine: empty (one node per host), K (nodes of K processes) or a,b,c (node sizes, summing to "
         "the job's processes on the host); a process's node is fixed by its local rank, the same in every "
         "communicator"),
    // Its syntax is checked by the core when the context starts (a bad list declines).
    text("net_devices", FIELD(net_devices), "", nullptr, nullptr, kLocal, 6,
         "Network devices for the rails between nodes, like NCCL_IB_HCA: empty (each "
         "rank uses the RDMA NIC nearest its CPUs by hwloc's PCI tree; UCX decides when there is none), "
         "a list (mlx5_0:1,mlx5_1:1), ^list to exclude, or none (UCX_NET_DEVICES/UCX decide)"),
    number("cuda", INT, FIELD(cuda), 1, in(0, 1, "is not 0 or 1"), kLocal, 6,
           "1: recognise GPU (cudaMalloc) buffers when a CUDA driver is present (loaded at run time); "
           "0: never load the CUDA driver"),
    number("rocm", INT, FIELD(rocm), 1, in(0, 1, "is not 0 or 1"), kLocal, 6,
           "1: recognise AMD GPU (hipMalloc) buffers when the HIP runtime (libamdhip64, loaded at run time) "
           "finds a GPU and no CUDA driver did (one vendor per process, CUDA first); 0: never load the HIP "
           "runtime"),
    text("gdr_level", FIELD(gdr_level), "PXB", gpurdma_gdr_level_valid, "is not one of LOC, PIX, PXB, PHB, SYS", kLocal,
         6,
         "Farthest GPU-to-NIC path over which GPU buffers may go by GPUDirect RDMA between "
         "nodes, as NCCL_NET_GDR_LEVEL: LOC (same device), PIX (one PCIe bridge), PXB (several PCIe "
         "bridges), PHB (through the CPU's PCIe host bridge) or SYS (across NUMA nodes). GPUDirect RDMA also "
         "needs UCX with CUDA memory support and UCX registering device memory (probed once). Where it is "
         "eligible, the rail stage's sends go straight from GPU memory (coll_gpurdma_rail_reduce auto or "
         "device), and arrivals may land in GPU memory (coll_gpurdma_gdr_recv). Verbose 1 prints the verdict"),
    choice("rail_reduce", FIELD(rail_reduce), "auto", rail_reduce_name, kLocal, 6,
           "GPU buffers across nodes: where the rail stage (the allreduce of each slice between nodes) reduces "
           "what arrives. auto: the mode estimated faster for a full slice (coll_gpurdma_chunk_size bytes) from the "
           "rail schedule's own work, this GPU's copy rates and step cost (timed at set-up) and the cost "
           "model's network and CPU reduction rates; host: each slice is copied once to page-locked host memory, "
           "reduced there by the CPU and "
           "copied back; device: the GPU reduces each arrival straight out of its (host) landing slot, in place "
           "in the receive buffer, and sends are staged to page-locked memory unless GPUDirect RDMA allows "
           "them straight from GPU memory. Each rank decides for itself (the messages are the same); verbose 1 "
           "prints the choice and why"),
    number("gdr_recv", INT, FIELD(gdr_recv), 1, in(0, 1, "is not 0 or 1"), kLocal, 6,
           "GPU buffers across nodes, where GPUDirect RDMA is eligible and the rail stage reduces on the GPU: "
           "1: the rank offers its rail peers GPU memory, and their messages above 8 KiB land there (flushed "
           "with cuFlushGPUDirectRDMAWrites before the GPU reads them where the GPU needs it); 0: arrivals "
           "land in host memory, which the GPU reads. Each rank decides for itself; verbose 1 prints where "
           "its arrivals land and why"),
    // -1: UCX's choice (UCX_IB_* or auto).
    number("ib_gid_index", INT, FIELD(ib_gid_index), -1, in(-1, 1023, "is not -1 or in 0..1023"), kLocal, 6,
           "RoCE/InfiniBand port GID index for gpurdma's UCX context, like NCCL_IB_GID_INDEX "
           "(RoCE: selects the address and RoCE version), 0 .. 1023; -1: UCX's choice (UCX_IB_GID_INDEX or auto). "
           "Only RDMA devices use it"),
    number("ib_tc", INT, FIELD(ib_tc), -1, in(-1, 255, "is not -1 or in 0..255"), kLocal, 6,
           "InfiniBand traffic class / RoCEv2 traffic class byte (DSCP << 2) for gpurdma's UCX context, like "
           "NCCL_IB_TC, 0 .. 255; -1: UCX's choice (UCX_IB_TRAFFIC_CLASS or auto). Only RDMA devices use it"),
    number("ib_sl", INT, FIELD(ib_sl), -1, in(-1, 15, "is not -1 or in 0..15"), kLocal, 6,
           "InfiniBand service level / RoCEv2 Ethernet priority for gpurdma's UCX context, like NCCL_IB_SL, "
           "0 .. 15; -1: UCX's choice (UCX_IB_SL or auto). Only RDMA devices use it"),
    number("recorder_size", INT, FIELD(recorder_size), 0, in(0, 65536, "is not in 0..65536"), kLocal, 5,
           "Calls each communicator's flight recorder keeps (collective, count, type, op, path, state; the start, "
           "end, peer and bytes of each stage of calls with schedules), for the live dump, gpurdma-doctor and the "
           "trace; rounded up to a power of two, 16 bytes per call (and 240 for each slot a timed call used). 0 "
           "(default: a history measured 7-29% slower on 8 B-4 KiB calls at np 2 here): no history, but the dump "
           "still has each communicator's calls begun and the call in flight once it has waited 10 ms, with "
           "where it waits. A trace (coll_gpurdma_trace_dir) keeps 64 where this is 0"),
    text("dump_dir", FIELD(dump_dir), "gpurdma-dump", nullptr, nullptr, kLocal, 5,
         "Folder (relative to each process's working directory, or absolute; made 0700 if missing) where a "
         "live dump writes one JSON file per process: on coll_gpurdma_dump_signal, when "
         "coll_gpurdma_dump_trigger appears, or when a call times out. Read it with gpurdma-doctor DIR. "
         "Empty: no dumps"),
    number("dump_signal", INT, FIELD(dump_signal), 12, in(0, 64, "is not in 0..64"), kLocal, 5,
           "Signal that makes every process write its dump without stopping the job (12 = SIGUSR2, which "
           "mpirun forwards to the ranks: kill -USR2 <mpirun's pid>); chained to any handler installed "
           "before. 0: no signal handler"),
    text("dump_trigger", FIELD(dump_trigger), "", nullptr, nullptr, kLocal, 5,
         "A file whose appearance (or new modification time) makes every process write its dump, for "
         "launchers that do not forward signals (touch it on a shared file system); checked twice a second "
         "by the dump thread. Empty: none"),
    text("trace_dir", FIELD(trace_dir), "", nullptr, nullptr, kAllRanks, 5,
         "Folder where each process writes, as each communicator is freed, its flight record (the last "
         "coll_gpurdma_recorder_size calls, their stages) as Chrome/Perfetto trace events, one file per "
         "communicator and process, in microseconds of the communicator's rank 0 clock (each rank's offset "
         "measured at set-up: three allgather rounds, only when tracing). contrib/trace-plot.py merges and "
         "draws them. Empty: no trace. All ranks must agree"),
    // Read by the core when the context starts (topo::find_fabric_address), one warning per host.
    text("fabric_topology", FIELD(fabric_topology), "", nullptr, nullptr, kLocal, 5,
         "A file in Slurm's topology.conf format (SwitchName=, Nodes=, Switches=) that says which switches "
         "each host sits under. The nodes of a communicator are then ordered so that nodes under one leaf "
         "switch are neighbours in every ring, and halving-doubling's first exchanges stay under one leaf. "
         "Empty: SLURM_TOPOLOGY_ADDR (and its _PATTERN), which srun sets with TopologyPlugin=topology/tree; "
         "without either, nodes keep the order of their lowest rank. The order is used only when every "
         "node's switches are known; each rank reports its own node's"),
    number("dump_on_timeout", INT, FIELD(dump_on_timeout), 1, in(0, 1, "is not 0 or 1"), kLocal, 5,
           "1: a call that times out (coll_gpurdma_timeout) writes the dump before it returns its error, and "
           "the error names the file; 0: it does not"),
};
#undef FIELD

constexpr size_t kCount = sizeof kTable / sizeof kTable[0];

uint64_t bits(double v)
{
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

// An agreed number as it travels: ints sign-extended, doubles by their bits.
uint64_t wire_number(const gpurdma_config_t &c, const gpurdma_param_info_t &p)
{
    switch (p.type) {
        case GPURDMA_PARAM_INT: return static_cast<uint64_t>(static_cast<int64_t>(field<int>(c, p)));
        case GPURDMA_PARAM_SIZE: return field<size_t>(c, p);
        case GPURDMA_PARAM_DOUBLE: return bits(field<double>(c, p));
        default: return 0;
    }
}

bool is_text(const gpurdma_param_info_t &p)
{
    return p.type == GPURDMA_PARAM_STRING || p.type == GPURDMA_PARAM_ENUM;
}

std::string wire_text(const gpurdma_config_t &c, const gpurdma_param_info_t &p)
{
    const char *t = field<const char *>(c, p);
    return t ? t : "";
}

}  // namespace

size_t count()
{
    return kCount;
}

const gpurdma_param_info_t &row(size_t index)
{
    return kTable[index];
}

void write_agreed(wire::Writer &record, const gpurdma_config_t &config)
{
    for (const auto &p : kTable) {
        if (!p.agreed) continue;
        if (is_text(p)) record.str(wire_text(config, p));
        else record.u64(wire_number(config, p));
    }
}

bool compare_agreed(wire::Reader &record, const gpurdma_config_t &config, std::string *differing)
{
    differing->clear();
    for (const auto &p : kTable) {
        if (!p.agreed) continue;
        bool same = false;
        if (is_text(p)) {
            std::string v;
            if (!record.str(&v)) return false;
            same = v == wire_text(config, p);
        } else {
            uint64_t v = 0;
            if (!record.u64(&v)) return false;
            same = v == wire_number(config, p);
        }
        if (!same) *differing += (differing->empty() ? "" : ", ") + std::string(p.name);
    }
    return true;
}

}  // namespace gpurdma::params

extern "C" {

int gpurdma_param_count(void)
{
    return static_cast<int>(gpurdma::params::count());
}

const gpurdma_param_info_t *gpurdma_param_info(int index)
{
    if (index < 0 || static_cast<size_t>(index) >= gpurdma::params::count()) return nullptr;
    return &gpurdma::params::row(static_cast<size_t>(index));
}

// Each is a spelling plan::parse_algorithm takes (tests/unit/test_params.cpp checks it).
const char *gpurdma_algorithm_name(int index)
{
    // The names live in plan/algorithms.cpp's table, with the algorithms themselves.
    return index >= 0 ? gpurdma::plan::algorithm_spelling(static_cast<size_t>(index)) : nullptr;
}

}  // extern "C"
