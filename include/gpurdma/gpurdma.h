/*
 * gpurdma core C API.
 *
 * The only interface between the Open MPI shim (mca/coll/gpurdma) and the C++17
 * core (libgpurdma). Nothing here depends on MPI: the caller supplies a bootstrap
 * (allgather over the group) through callbacks, so the core can also be driven by a
 * plain launcher.
 */
#ifndef GPURDMA_GPURDMA_H
#define GPURDMA_GPURDMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpurdma_status {
    GPURDMA_OK = 0,
    GPURDMA_ERR_UNSUPPORTED = 1, /* op/type/shape we do not handle: caller falls back */
    GPURDMA_ERR_NO_RESOURCE = 2, /* set-up could not get memory, endpoints, ... */
    GPURDMA_ERR_TRANSPORT = 3, /* a transfer failed in the middle of a collective */
    GPURDMA_ERR_TIMEOUT = 4, /* a peer did not answer within the timeout */
    GPURDMA_ERR_INVALID = 5, /* bad argument */
    GPURDMA_ERR_BROKEN = 6, /* communicator disabled by an earlier failure */
    GPURDMA_ERR_CONCURRENT = 7 /* another thread is inside a call that starts a collective on this
                                  communicator (erroneous in MPI); nothing was done, the other call goes on */
} gpurdma_status_t;

/* Element types. Each names a C layout, not an MPI handle: the shim maps handles. */
typedef enum gpurdma_dtype {
    GPURDMA_INT8 = 0,
    GPURDMA_UINT8,
    GPURDMA_INT16,
    GPURDMA_UINT16,
    GPURDMA_INT32,
    GPURDMA_UINT32,
    GPURDMA_INT64,
    GPURDMA_UINT64,
    GPURDMA_FLOAT, /* float */
    GPURDMA_DOUBLE, /* double */
    GPURDMA_LONG_DOUBLE, /* long double (x87 80-bit in 16 bytes on x86-64) */
    GPURDMA_BOOL, /* C _Bool, 1 byte */
    GPURDMA_BYTE, /* MPI_BYTE: bitwise ops only */
    GPURDMA_FLOAT_COMPLEX, /* float _Complex */
    GPURDMA_DOUBLE_COMPLEX, /* double _Complex */
    GPURDMA_LONG_DOUBLE_COMPLEX,
    GPURDMA_FLOAT_INT, /* struct { float v; int i; }        MAXLOC/MINLOC */
    GPURDMA_DOUBLE_INT, /* struct { double v; int i; } */
    GPURDMA_LONG_INT, /* struct { long v; int i; } */
    GPURDMA_2INT, /* struct { int v; int i; } */
    GPURDMA_SHORT_INT, /* struct { short v; int i; } */
    GPURDMA_LONG_DOUBLE_INT, /* struct { long double v; int i; } */
    GPURDMA_FLOAT16, /* IEEE binary16 (_Float16, MPIX_C_FLOAT16): SUM, PROD, MIN, MAX,
                                 each step computed in float and rounded to half */
    GPURDMA_DTYPE_COUNT
} gpurdma_dtype_t;

typedef enum gpurdma_op {
    GPURDMA_SUM = 0,
    GPURDMA_PROD,
    GPURDMA_MIN,
    GPURDMA_MAX,
    GPURDMA_LAND,
    GPURDMA_LOR,
    GPURDMA_LXOR,
    GPURDMA_BAND,
    GPURDMA_BOR,
    GPURDMA_BXOR,
    GPURDMA_MAXLOC,
    GPURDMA_MINLOC,
    GPURDMA_OP_COUNT
} gpurdma_op_t;

/* Size in bytes of one element (the C sizeof of the layout). */
size_t gpurdma_dtype_size(gpurdma_dtype_t dtype);

/* Whether (op, dtype) is a combination the MPI standard defines and we implement. */
int gpurdma_op_supported(gpurdma_op_t op, gpurdma_dtype_t dtype);

const char *gpurdma_dtype_name(gpurdma_dtype_t dtype);
const char *gpurdma_op_name(gpurdma_op_t op);
const char *gpurdma_status_name(gpurdma_status_t status);

/*
 * dst[i] = a[i] OP b[i] for i < count. dst may alias a or b. The operand order is
 * fixed (a is the lower-ranked contribution), which is how every rank computes
 * bit-identical floating-point results.
 */
gpurdma_status_t gpurdma_reduce_local(gpurdma_op_t op, gpurdma_dtype_t dtype, void *dst, const void *a, const void *b,
                                      size_t count);

/* ---- memory types ---- */

/* 1 if ptr is GPU device memory (the GPU runtime loaded at run time, if present), also
 * that of the other vendor's runtime where the application loaded it beside ours. */
int gpurdma_is_device_memory(const void *ptr);

/* Copies bytes between host and device memory, in either direction (the other vendor's
 * memory by its own runtime's copies). */
gpurdma_status_t gpurdma_memcpy(void *dst, const void *src, size_t bytes);

/*
 * Host copies of a call's GPU buffers, for an MPI whose own collectives cannot read GPU
 * memory: the span of `count` elements of a datatype (extent, true lower bound, true
 * extent, in bytes) of each buffer (send NULL: in place, no send copy). The receive span
 * is copied too: it is the operand in place, and the copy back must keep the bytes a
 * datatype's gaps leave alone. gpurdma_host_copies_create allocates and fills them;
 * _send and _recv give pointers placed as the buffers are (_send NULL in place); _fill
 * copies the GPU data in again (a persistent call's next start); _copy_back copies the
 * receive copy to the GPU buffer; _destroy frees them (NULL is ignored). Each returns
 * GPURDMA_ERR_NO_RESOURCE if host memory ran out, GPURDMA_ERR_TRANSPORT if a copy failed.
 */
typedef struct gpurdma_host_copies gpurdma_host_copies_t;
gpurdma_status_t gpurdma_host_copies_create(const void *send, void *recv, size_t count, ptrdiff_t extent,
                                            ptrdiff_t true_lb, ptrdiff_t true_extent, gpurdma_host_copies_t **out);
/* The same where the two buffers span different bytes (the other collectives): each
 * buffer's span from its true lower bound, in bytes (a span of 0: nothing copied). */
gpurdma_status_t gpurdma_host_copies_create_spans(const void *send, size_t send_span, ptrdiff_t send_lb, void *recv,
                                                  size_t recv_span, ptrdiff_t recv_lb, gpurdma_host_copies_t **out);
gpurdma_status_t gpurdma_host_copies_fill(gpurdma_host_copies_t *copies);
void *gpurdma_host_copies_send(gpurdma_host_copies_t *copies);
void *gpurdma_host_copies_recv(gpurdma_host_copies_t *copies);
gpurdma_status_t gpurdma_host_copies_copy_back(gpurdma_host_copies_t *copies);
void gpurdma_host_copies_destroy(gpurdma_host_copies_t *copies);

/*
 * The previous blocking allreduce on host copies: creates them, calls
 * call(host_send, host_recv, arg), copies the result back and frees them. Returns
 * GPURDMA_OK with *call_rc set to call's return (the result copied back only if it is
 * 0), or an error of the copies (*call_rc untouched unless call ran).
 */
typedef int (*gpurdma_host_call_fn_t)(const void *send, void *recv, void *arg);
gpurdma_status_t gpurdma_staged_host_call(const void *send, void *recv, size_t count, ptrdiff_t extent,
                                          ptrdiff_t true_lb, ptrdiff_t true_extent, gpurdma_host_call_fn_t call,
                                          void *arg, int *call_rc);

/* ---- bootstrap: supplied by the caller, used only at set-up ---- */

/*
 * Gather `bytes` from every member into recv (size * bytes, ordered by rank).
 * Returns 0 on success. Every member calls it in the same order.
 */
typedef int (*gpurdma_allgather_fn_t)(const void *send, void *recv, size_t bytes, void *arg);

typedef struct gpurdma_bootstrap {
    gpurdma_allgather_fn_t allgather;
    void *arg;
} gpurdma_bootstrap_t;

/* Messages the core wants the caller to print (verbose or errors). */
typedef void (*gpurdma_log_fn_t)(int level, const char *message);

/* ---- configuration (MCA parameters in the shim) ---- */
typedef struct gpurdma_config {
    int verbose; /* 0 silent, 1 one line per communicator, 2+ per call */
    size_t chunk_size; /* pipeline chunk and landing-slot size, bytes */
    int slots; /* landing slots per peer channel (pipeline depth) */
    int rail_qps; /* endpoints (on an RDMA NIC, QPs) per inter-node peer, its slots striped over them so
                                 ECMP spreads them; 0: automatic (1 on one host, else 2) */
    int rail_slots; /* landing slots per inter-node peer: puts a rail has in flight to one peer; 0: slots */
    size_t
        small_msg_max; /* largest message for the latency path (one wait on a node, recursive doubling between nodes) */
    size_t node_chunk_size; /* block of the one-node shared-memory allreduce, bytes */
    double timeout_s; /* longest wait on any peer before a collective fails */
    double barrier_timeout_s; /* the same for MPI_Barrier, whose wait is for the application's slowest rank */
    const char *algorithm; /* "auto", "node", "ring", "rd" (recursive doubling), "hier" or "rhd" */
    const char *ucx_tls; /* UCX transports for our own context ("" = UCX default) */
    const char *logical_nodes; /* "" by host; "K" or "a,b,c": split hosts into virtual nodes */
    const char *net_devices; /* "" nearest RDMA NIC; "mlx5_0:1,..." or "^dev" to restrict; "none" */
    int cuda; /* 1: recognise GPU buffers if a CUDA driver is present; 0: never load it */
    int rocm; /* 1: recognise AMD GPU buffers if a HIP runtime is present (and no CUDA one); 0: never load it */
    int local_processes; /* processes of the job on this host (0: unknown): more than its CPUs means yield when idle */
    int local_rank; /* this process's rank among them (-1: unknown): fixes its logical node */
    double net_alpha_us; /* cost model: microseconds per message between nodes */
    double net_gbps; /* cost model: GB/s between nodes */
    double shm_alpha_us; /* cost model: microseconds per message within a node */
    double shm_gbps; /* cost model: GB/s within a node */
    double reduce_gbps; /* cost model: GB/s of a reduction */
    int calibrate; /* 1: communicators that span nodes measure the cost model's links at set-up */
    double spin_us; /* a wait longer than this (microseconds) yields the core while it waits; negative:
                                 spin until done, unless the host's ranks cannot each have a CPU of their own */
    size_t device_stage_max; /* GPU buffers on one node up to this many bytes stage through page-locked
                                 host memory and the host latency path instead of the device path */
    const char *gdr_level; /* farthest GPU-NIC path for GPUDirect RDMA: LOC, PIX, PXB, PHB or SYS
                                 (NCCL_NET_GDR_LEVEL's scale); copied by the context */
    const char *rail_reduce; /* GPU buffers across nodes: where the rail stage reduces arrivals: "auto",
                                 "host" (staged to page-locked chunks, the CPU) or "device" (the GPU) */
    int gdr_recv; /* 1: where GPUDirect RDMA is eligible and the GPU reduces the rail, arrivals may land
                                 in GPU memory offered to the rail peers; 0: always in host memory */
    int ib_gid_index; /* RoCE/IB port GID index of our UCX context (NCCL_IB_GID_INDEX); -1: UCX's */
    int ib_tc; /* IB traffic class / RoCEv2 DSCP (NCCL_IB_TC), 0..255; -1: UCX's */
    int ib_sl; /* IB service level / RoCEv2 priority (NCCL_IB_SL), 0..15; -1: UCX's */
    int progress_thread; /* 1: a thread of the context advances nonblocking and persistent calls between
                                 the caller's calls (started by the first such call); 0: only inside them */
    double progress_thread_pause_us; /* the thread's pause after a poll that moved nothing */
    double progress_thread_grace_us; /* it keeps off while an MPI thread polls and this long after */
    double progress_thread_linger_us; /* it polls on a timer this long after the last call, then sleeps */
    int reduce_scatter_enable; /* 0: MPI_Reduce_scatter(_block) and their I/persistent forms go to the previous module */
    int allgather_enable; /* 0: the same for MPI_Allgather */
    int bcast_enable; /* 0: the same for MPI_Bcast */
    int reduce_enable; /* 0: the same for MPI_Reduce */
    int barrier_enable; /* 0: the same for MPI_Barrier */
    size_t rail_unit; /* bytes of a slice per unit of the hierarchical schedule's stage between nodes; 0: the
                                 cost model's choice */
    const char *rail_algorithm; /* that stage's algorithm per unit: "auto", "ring", "rd" or "rhd"
                                 (Rabenseifner's halving-doubling) */
    size_t shm_arena_size; /* bytes of node shared memory this process hands to the communicators it leads
                                 on its node (one sparse file, slices reused); 0: a /dev/shm segment each */
    int recorder_size; /* calls each communicator's flight recorder keeps; 0: no recorder */
    const char *dump_dir; /* where live dumps go (one JSON file per process); "": none */
    int dump_signal; /* the signal that asks for a dump (default SIGUSR2); 0: none */
    const char *dump_trigger; /* a file whose appearance asks for a dump; "": none */
    int dump_on_timeout; /* 1: a call that times out writes the dump before its error */
    const char *trace_dir; /* "": no trace; else each communicator's record as Chrome trace events, at its free */
    const char *fabric_topology; /* a Slurm topology.conf naming each node's switches; "": Slurm's
                                 SLURM_TOPOLOGY_ADDR if set, else the fabric is unknown */
    int threads; /* 1: several threads may call into the context at once (MPI_THREAD_MULTIPLE): UCX's
                                 worker is created thread-safe. Not a parameter: the caller's thread level */
    gpurdma_log_fn_t log; /* may be NULL */
    /* The caller's own progress (Open MPI's opal_progress), called now and then while a
     * blocking call waits, so that the caller's other operations that peers may be
     * waiting for (another module's nonblocking collective, point-to-point) still move.
     * It may call gpurdma_context_progress (a communicator this thread is driving is
     * skipped). May be NULL. */
    void (*outside_progress)(void);
} gpurdma_config_t;

/* Every parameter at its default (from the parameter table below); local_rank -1, log NULL. */
void gpurdma_config_default(gpurdma_config_t *config);

/* 1 if level is one of LOC, PIX, PXB, PHB, SYS (any case): a valid gdr_level. */
int gpurdma_gdr_level_valid(const char *level);

/* ---- the parameter table: one row per parameter (coll_gpurdma_<name> in the shim) ---- */
typedef enum gpurdma_param_type {
    GPURDMA_PARAM_INT = 0, /* int field */
    GPURDMA_PARAM_SIZE, /* size_t field, bytes */
    GPURDMA_PARAM_DOUBLE, /* double field */
    GPURDMA_PARAM_STRING, /* const char * field, free text */
    GPURDMA_PARAM_ENUM /* const char * field holding one of value_name(0), value_name(1), ... */
} gpurdma_param_type_t;

typedef struct gpurdma_param_info {
    const char *name; /* without the "coll_gpurdma_" prefix: "chunk_size" */
    gpurdma_param_type_t type;
    size_t offset; /* where it lives: offsetof(gpurdma_config_t, field) */
    double default_number; /* INT, SIZE and DOUBLE */
    const char *default_text; /* STRING and ENUM */
    /* Valid values (checked by gpurdma_config_validate). Numbers: min..max, min itself
     * excluded if min_excluded, a multiple of multiple_of if not 0 (SIZE only); NaN never.
     * STRING: text_valid(text) if set; the core checks some texts itself later
     * (logical_nodes, net_devices). ENUM: one of value_name(i). */
    double min, max;
    int min_excluded;
    size_t multiple_of;
    int (*text_valid)(const char *text);
    const char *(*value_name)(int index); /* ENUM: the names, NULL past the last; the index is the MCA value */
    const char *complaint; /* what the warning says of a bad value: "is not in 1..64" (NULL: ENUM's list) */
    int info_level; /* Open MPI's MCA info level, 1 .. 9 */
    int agreed; /* 1: every rank of a communicator must have the same value (set-up checks) */
    const char *help;
} gpurdma_param_info_t;

/* How a value is handed to gpurdma_config_set: the member that matches the type
 * (ENUM and STRING: text). */
typedef union gpurdma_param_value {
    int i;
    size_t size;
    double d;
    const char *text;
} gpurdma_param_value_t;

int gpurdma_param_count(void);
/* Row `index` (0 .. count-1), NULL outside. */
const gpurdma_param_info_t *gpurdma_param_info(int index);

/* The names coll_gpurdma_algorithm takes ("auto", "node", "ring", "rd", "hier", then the
 * aliases "recursive_doubling", "hierarchical"); NULL past the last. */
const char *gpurdma_algorithm_name(int index);

/* Stores value in row `index`'s field as given (texts: the pointer, NULL as ""); no check.
 * GPURDMA_ERR_INVALID for a bad index. */
gpurdma_status_t gpurdma_config_set(gpurdma_config_t *config, int index, gpurdma_param_value_t value);

/* Replaces every value the table (and the rules between parameters: slots x chunk_size
 * at most 1 GiB) does not allow by its default, with one warning each through
 * config->log at level 0: "coll_gpurdma_slots=0 is not in 1..64; using 4". Returns how
 * many were replaced, or -1 if it could not check (out of memory). */
int gpurdma_config_validate(gpurdma_config_t *config);

/* ---- process context: one per process, shared by all communicators ---- */
typedef struct gpurdma_context gpurdma_context_t;

/*
 * Checks the configuration (GPURDMA_ERR_INVALID for bad values). UCX starts later, on
 * the first communicator set-up; if it cannot, that set-up declines on every rank.
 */
gpurdma_status_t gpurdma_context_create(const gpurdma_config_t *config, gpurdma_context_t **context);
void gpurdma_context_destroy(gpurdma_context_t *context);

/* Drives the transport once, then every communicator with nonblocking or persistent
 * calls in flight (one that another thread is driving is skipped, not waited for);
 * returns the number of events. Cheap when idle; safe from any thread. */
int gpurdma_context_progress(gpurdma_context_t *context);

/* ---- communicator ---- */
typedef struct gpurdma_comm gpurdma_comm_t;

/*
 * Describes the group. Only local facts: the bootstrap is used later, lazily, on the
 * first collective (which every member enters), so creating a communicator costs
 * nothing until it is used.
 */
typedef struct gpurdma_comm_params {
    int rank;
    int size;
    gpurdma_bootstrap_t bootstrap;
    const char *name; /* for messages, e.g. "MPI_COMM_WORLD" or "cid 5" */
} gpurdma_comm_params_t;

gpurdma_status_t gpurdma_comm_create(gpurdma_context_t *context, const gpurdma_comm_params_t *params,
                                     gpurdma_comm_t **comm);
void gpurdma_comm_destroy(gpurdma_comm_t *comm);

/*
 * Blocking allreduce of `count` elements, on host or GPU buffers (GPU buffers are
 * staged through host memory for now). sendbuf == NULL means in place (the data is
 * in recvbuf). Returns GPURDMA_ERR_UNSUPPORTED, before any communication and on every
 * rank alike, for what the caller must hand to another implementation. Other errors
 * leave a message retrievable with gpurdma_comm_last_error.
 */
gpurdma_status_t gpurdma_allreduce(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gpurdma_dtype_t dtype, gpurdma_op_t op);

/* ---- the other collectives: one call description for all ----
 *
 * count, by collective: ALLREDUCE, REDUCE, BCAST: the message's elements; ALLGATHER: each
 * rank's block; REDUCE_SCATTER: each rank's result (MPI_Reduce_scatter_block), unless
 * counts (size entries) is given (MPI_Reduce_scatter). sendbuf NULL is MPI_IN_PLACE:
 * REDUCE_SCATTER's input is in recvbuf (the result goes to its start); ALLGATHER's own
 * block is already at recvbuf + rank x count; REDUCE's (root only) input is in recvbuf.
 * BCAST's buffer is recvbuf (sendbuf ignored). REDUCE's recvbuf matters at the root only.
 * dtype gives ALLGATHER and BCAST their element size only; op matters for reductions only.
 * GPURDMA_ERR_UNSUPPORTED as for allreduce, and for a collective switched off
 * (coll_gpurdma_<coll>_enable 0): the caller hands the call on.
 */
typedef enum gpurdma_coll {
    GPURDMA_COLL_ALLREDUCE = 0,
    GPURDMA_COLL_REDUCE_SCATTER,
    GPURDMA_COLL_ALLGATHER,
    GPURDMA_COLL_BCAST,
    GPURDMA_COLL_REDUCE,
    GPURDMA_COLL_COUNT
} gpurdma_coll_t;

typedef struct gpurdma_coll_args {
    gpurdma_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    const size_t *counts; /* REDUCE_SCATTER only: one count per rank, or NULL; copied by the call */
    gpurdma_dtype_t dtype;
    gpurdma_op_t op;
    int root; /* BCAST and REDUCE */
} gpurdma_coll_args_t;

/* "allreduce", "reduce_scatter", "allgather", "bcast", "reduce". */
const char *gpurdma_coll_name(gpurdma_coll_t coll);

gpurdma_status_t gpurdma_collective(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args);

/* ---- nonblocking and persistent allreduce ----
 *
 * A communicator runs its calls one at a time in the order they were started (every
 * rank starts collectives in the same order): a blocking call started while
 * nonblocking ones are in flight first completes those. The communicator's set-up, a
 * collective exchange over the bootstrap that waits for every rank, runs in its first
 * blocking call (gpurdma_allreduce, gpurdma_collective) only: a nonblocking or
 * persistent start never waits on a peer, so one made before the set-up returns
 * GPURDMA_ERR_UNSUPPORTED (on every rank alike: every rank has made the same calls
 * before it) and the caller hands it on. A communicator of one rank needs no set-up.
 *
 * Threads: calls on different communicators may run at the same time (config.threads).
 * Starting calls (gpurdma_allreduce, gpurdma_iallreduce, gpurdma_allreduce_init,
 * gpurdma_request_start) on one communicator from two threads at once is erroneous:
 * the later one returns GPURDMA_ERR_CONCURRENT and does nothing. Progress and test
 * calls may come from any thread.
 */
typedef struct gpurdma_request gpurdma_request_t;

/* Called exactly once per started call when it completes: GPURDMA_OK, or an error (the
 * message in gpurdma_comm_last_error; the communicator is broken from then on). It runs
 * in whichever thread drives the call (gpurdma_context_progress, gpurdma_request_test,
 * a later call on the communicator) with the communicator's engine held: it must not
 * call gpurdma for this communicator. */
typedef void (*gpurdma_complete_fn_t)(void *arg, gpurdma_status_t status);

/*
 * Starts a nonblocking allreduce (arguments as gpurdma_allreduce). GPURDMA_OK: *request
 * is in flight and complete(arg, status) will be called once; the buffers belong to the
 * call until then. GPURDMA_ERR_UNSUPPORTED: nothing started, on every rank alike: the
 * caller hands the call to another implementation. Other errors: nothing started.
 */
gpurdma_status_t gpurdma_iallreduce(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                    gpurdma_dtype_t dtype, gpurdma_op_t op, gpurdma_complete_fn_t complete, void *arg,
                                    gpurdma_request_t **request);

/*
 * Plans a persistent allreduce: the algorithm's choice and its schedule, now, on a
 * communicator already set up; *request is inactive until gpurdma_request_start.
 * GPURDMA_ERR_UNSUPPORTED as for gpurdma_iallreduce (decided here, the same on every rank).
 */
gpurdma_status_t gpurdma_allreduce_init(gpurdma_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                        gpurdma_dtype_t dtype, gpurdma_op_t op, gpurdma_complete_fn_t complete,
                                        void *arg, gpurdma_request_t **request);

/* The same for any collective (gpurdma_coll_args_t above). */
gpurdma_status_t gpurdma_icollective(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args,
                                     gpurdma_complete_fn_t complete, void *arg, gpurdma_request_t **request);
gpurdma_status_t gpurdma_collective_init(gpurdma_comm_t *comm, const gpurdma_coll_args_t *args,
                                         gpurdma_complete_fn_t complete, void *arg, gpurdma_request_t **request);

/* ---- MPI_Barrier ----
 *
 * A one-byte allreduce of bytes the communicator owns: no rank's result is complete
 * before every rank's byte has arrived, so whichever path the allreduce takes (the node's
 * mailboxes, the schedules between nodes) is a barrier, in its blocking, nonblocking and
 * persistent forms alike, with the allreduce's rules (set-up in the first blocking call,
 * GPURDMA_ERR_UNSUPPORTED on every rank alike). Also unsupported where barrier_enable
 * is 0. Counted in barrier_calls only.
 */
gpurdma_status_t gpurdma_barrier(gpurdma_comm_t *comm);
gpurdma_status_t gpurdma_ibarrier(gpurdma_comm_t *comm, gpurdma_complete_fn_t complete, void *arg,
                                  gpurdma_request_t **request);
gpurdma_status_t gpurdma_barrier_init(gpurdma_comm_t *comm, gpurdma_complete_fn_t complete, void *arg,
                                      gpurdma_request_t **request);

/* Starts an inactive persistent request (after init, or after its last call completed):
 * GPURDMA_ERR_INVALID if it is in flight or not persistent; BROKEN on a broken
 * communicator; CONCURRENT as above. Only moves data. */
gpurdma_status_t gpurdma_request_start(gpurdma_request_t *request);

/* Drives the request's communicator once (if no other thread is driving it) and
 * returns 1 if the request's call has completed (its callback has run), else 0. */
int gpurdma_request_test(gpurdma_request_t *request);

/* Releases a request. One in flight is kept until its call completes (its callback
 * still runs) and is released then: returns 1. Otherwise released at once: returns 0. */
int gpurdma_request_free(gpurdma_request_t *request);

/* Text of the last failure on this communicator ("" if none). */
const char *gpurdma_comm_last_error(const gpurdma_comm_t *comm);

/* 1 once the communicator's set-up has run (in a blocking call; whatever its verdict),
 * or where it needs none (one rank); 0 before: its nonblocking and persistent calls are
 * handed on (GPURDMA_ERR_UNSUPPORTED). For the caller's messages. */
int gpurdma_comm_is_set_up(const gpurdma_comm_t *comm);

/* Counters, for tests and verbose output. */
typedef struct gpurdma_comm_stats {
    uint64_t calls; /* allreduce calls completed (the other collectives: their own counters below) */
    uint64_t setups; /* lazy set-ups done (1 after first use) */
    uint64_t registrations; /* memory registrations (UCX) made for this communicator */
    uint64_t shm_segments; /* shared segments created or attached */
    uint64_t bytes_put; /* payload bytes written to peers */
    uint64_t ring_calls;
    uint64_t rd_calls;
    uint64_t hier_calls;
    uint64_t device_calls; /* GPU-buffer calls of any collective done on the GPU (not staged through host) */
    uint64_t node_calls; /* one-node shared-memory allreduce */
    uint64_t nonblocking_calls; /* of calls: started by gpurdma_iallreduce */
    uint64_t persistent_calls; /* of calls: started by gpurdma_request_start */
    /* Calls of the other collectives completed (not in calls, which counts allreduces). */
    uint64_t reduce_scatter_calls;
    uint64_t allgather_calls;
    uint64_t bcast_calls;
    uint64_t reduce_calls;
    uint64_t barrier_calls; /* MPI_Barrier (any form): one-byte allreduces, not in calls nor the algorithms' */
    /* Per stage, from the flight recorder (recorder_size > 0), over the calls whose schedules
     * stamp stages (not the one-node latency path): the stage's window (first step to last,
     * microseconds; a pipeline's windows overlap) and the bytes this rank sent in it. */
    uint64_t stage_node_reduce_scatter_us;
    uint64_t stage_node_reduce_scatter_bytes;
    uint64_t stage_rail_us; /* the schedules' exchanges: between nodes in the hierarchical path, or the whole of
                               a flat ring, recursive doubling, halving-doubling or tree */
    uint64_t stage_rail_bytes;
    uint64_t stage_node_allgather_us;
    uint64_t stage_node_allgather_bytes;
    uint64_t stage_gpu_copy_us; /* GPU buffers across nodes: copies to and from page-locked staging */
} gpurdma_comm_stats_t;

void gpurdma_comm_get_stats(const gpurdma_comm_t *comm, gpurdma_comm_stats_t *stats);

/* The same counters summed over every communicator of the process, freed ones too. */
void gpurdma_context_get_stats(const gpurdma_context_t *context, gpurdma_comm_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* GPURDMA_GPURDMA_H */
