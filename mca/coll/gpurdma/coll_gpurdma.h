/*
 * coll/gpurdma: the thin C shim between Open MPI's coll framework and the gpurdma
 * core (include/gpurdma/gpurdma.h). No algorithm lives here: it maps MPI handles to
 * the core's types, supplies the set-up bootstrap from the previous module's
 * allgather, and hands anything the core declines to the previous allreduce.
 */
#ifndef MCA_COLL_GPURDMA_H
#define MCA_COLL_GPURDMA_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"
#include "opal/class/opal_object.h"

#include "coll_gpurdma_compat.h"

#include "gpurdma/gpurdma.h"

BEGIN_C_DECLS

/* MCA parameters and process-wide state. */
typedef struct mca_coll_gpurdma_globals {
    int priority;
    int verbose; /* coll_gpurdma_verbose, read at open */
    int gpu_buffers; /* GPU buffers recognised (coll_gpurdma_cuda or coll_gpurdma_rocm) */
    int output; /* opal_output stream */
    gpurdma_context_t *context; /* created on first use (under the component's lock) */
    bool context_failed; /* do not retry a context that could not start */
    bool context_threads; /* the context was made for MPI_THREAD_MULTIPLE */
    int live_modules; /* the context outlives every module (atomic) */
    bool closing;
} mca_coll_gpurdma_globals_t;

extern mca_coll_gpurdma_globals_t mca_coll_gpurdma_globals;

GPURDMA_COMPONENT_DECLSPEC extern const GPURDMA_COLL_COMPONENT_T mca_coll_gpurdma_component;

typedef struct mca_coll_gpurdma_module {
    mca_coll_base_module_t super;
    struct ompi_communicator_t *comm;
    gpurdma_comm_t *core;
    /* The lower-priority functions we fall back to and bootstrap with, retained. */
    mca_coll_base_module_allreduce_fn_t prev_allreduce;
    mca_coll_base_module_t *prev_allreduce_module;
    mca_coll_base_module_allgather_fn_t prev_allgather;
    mca_coll_base_module_t *prev_allgather_module;
    /* May be NULL (no lower module has them): then the blocking fallback runs and the
     * request returned is already complete. */
    mca_coll_base_module_iallreduce_fn_t prev_iallreduce;
    mca_coll_base_module_t *prev_iallreduce_module;
    mca_coll_base_module_allreduce_init_fn_t prev_allreduce_init;
    mca_coll_base_module_t *prev_allreduce_init_module;
    /* The other collectives' previous functions (coll_gpurdma_collectives.c), retained.
     * The nonblocking and persistent ones may be NULL. */
    mca_coll_base_module_reduce_scatter_block_fn_t prev_reduce_scatter_block;
    mca_coll_base_module_t *prev_reduce_scatter_block_module;
    mca_coll_base_module_reduce_scatter_fn_t prev_reduce_scatter;
    mca_coll_base_module_t *prev_reduce_scatter_module;
    mca_coll_base_module_bcast_fn_t prev_bcast;
    mca_coll_base_module_t *prev_bcast_module;
    mca_coll_base_module_reduce_fn_t prev_reduce;
    mca_coll_base_module_t *prev_reduce_module;
    mca_coll_base_module_ireduce_scatter_block_fn_t prev_ireduce_scatter_block;
    mca_coll_base_module_t *prev_ireduce_scatter_block_module;
    mca_coll_base_module_ireduce_scatter_fn_t prev_ireduce_scatter;
    mca_coll_base_module_t *prev_ireduce_scatter_module;
    mca_coll_base_module_iallgather_fn_t prev_iallgather;
    mca_coll_base_module_t *prev_iallgather_module;
    mca_coll_base_module_ibcast_fn_t prev_ibcast;
    mca_coll_base_module_t *prev_ibcast_module;
    mca_coll_base_module_ireduce_fn_t prev_ireduce;
    mca_coll_base_module_t *prev_ireduce_module;
    mca_coll_base_module_reduce_scatter_block_init_fn_t prev_reduce_scatter_block_init;
    mca_coll_base_module_t *prev_reduce_scatter_block_init_module;
    mca_coll_base_module_reduce_scatter_init_fn_t prev_reduce_scatter_init;
    mca_coll_base_module_t *prev_reduce_scatter_init_module;
    mca_coll_base_module_allgather_init_fn_t prev_allgather_init;
    mca_coll_base_module_t *prev_allgather_init_module;
    mca_coll_base_module_bcast_init_fn_t prev_bcast_init;
    mca_coll_base_module_t *prev_bcast_init_module;
    mca_coll_base_module_reduce_init_fn_t prev_reduce_init;
    mca_coll_base_module_t *prev_reduce_init_module;
    mca_coll_base_module_barrier_fn_t prev_barrier;
    mca_coll_base_module_t *prev_barrier_module;
    mca_coll_base_module_ibarrier_fn_t prev_ibarrier;
    mca_coll_base_module_t *prev_ibarrier_module;
    mca_coll_base_module_barrier_init_fn_t prev_barrier_init;
    mca_coll_base_module_t *prev_barrier_init_module;
    int set_up; /* the core's set-up of this communicator is done (sticky, atomic; coll_gpurdma_collectives.c) */
    char name[96];
} mca_coll_gpurdma_module_t;

OBJ_CLASS_DECLARATION(mca_coll_gpurdma_module_t);

int mca_coll_gpurdma_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_gpurdma_comm_query(struct ompi_communicator_t *comm, int *priority);

int mca_coll_gpurdma_allreduce(const void *sbuf, void *rbuf, gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                               struct ompi_op_t *op, struct ompi_communicator_t *comm, mca_coll_base_module_t *module);

/* Nonblocking and persistent allreduce (coll_gpurdma_request.c). */
int mca_coll_gpurdma_iallreduce(const void *sbuf, void *rbuf, gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                                struct ompi_op_t *op, struct ompi_communicator_t *comm, ompi_request_t **request,
                                mca_coll_base_module_t *module);
int mca_coll_gpurdma_allreduce_init(const void *sbuf, void *rbuf, gpurdma_coll_count_t count,
                                    struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                    struct ompi_communicator_t *comm, struct ompi_info_t *info,
                                    ompi_request_t **request, mca_coll_base_module_t *module);
/* One call of the other collectives as MPI made it (MPI_IN_PLACE kept): what the
 * previous module is called with, and what the core's arguments are made from. */
typedef struct mca_coll_gpurdma_call {
    gpurdma_coll_t coll;
    const void *sbuf;
    void *rbuf;
    gpurdma_coll_count_t scount; /* allgather's send count; bcast, reduce: the count */
    struct ompi_datatype_t *sdtype; /* the reductions' and bcast's datatype; allgather's send type */
    gpurdma_coll_count_t rcount; /* allgather's receive count; reduce_scatter_block's count */
    struct ompi_datatype_t *rdtype; /* allgather's receive type */
    const int *rcounts; /* reduce_scatter (v); NULL for the block form */
    struct ompi_op_t *op;
    int root;
} mca_coll_gpurdma_call_t;

/* The bytes a call's buffers span on this rank from their true lower bounds (0: the
 * buffer is not used), and whether either is GPU memory; false for an unknown collective. */
typedef struct mca_coll_gpurdma_spans {
    size_t send;
    ptrdiff_t send_lb;
    size_t recv;
    ptrdiff_t recv_lb;
    bool device;
} mca_coll_gpurdma_spans_t;
bool mca_coll_gpurdma_call_spans(const mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c,
                                 mca_coll_gpurdma_spans_t *out);
/* "reduce_scatter_block", "allgather", ... for messages. */
const char *mca_coll_gpurdma_call_name(const mca_coll_gpurdma_call_t *c);
/* The previous module's blocking call, on host copies of GPU buffers (coll_gpurdma_collectives.c). */
int mca_coll_gpurdma_previous_call(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, const char *why);
/* The previous module's nonblocking or persistent call, on the buffers given. */
int mca_coll_gpurdma_previous_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *c, bool persistent,
                                      struct ompi_info_t *info, ompi_request_t **request);
/* A copy of the call for a request's life: its datatypes and op retained, its counts
 * copied (released by the request's destructor); NULL if memory ran out. */
mca_coll_gpurdma_call_t *mca_coll_gpurdma_keep_call(const mca_coll_gpurdma_module_t *m,
                                                    const mca_coll_gpurdma_call_t *c);

#if OMPI_MAJOR_VERSION < 6
/* MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgather, MPI_Bcast, MPI_Reduce and
 * their nonblocking and persistent forms (coll_gpurdma_collectives.c). Not on 6.x, whose
 * count arrays differ (the base's functions stay there). */
void mca_coll_gpurdma_install_collectives(mca_coll_gpurdma_module_t *m);
void mca_coll_gpurdma_save_previous_collectives(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm);
/* MPI_Barrier, MPI_Ibarrier, MPI_Barrier_init (coll_gpurdma_barrier.c). */
void mca_coll_gpurdma_install_barrier(mca_coll_gpurdma_module_t *m);
#endif
void mca_coll_gpurdma_release_previous_collectives(mca_coll_gpurdma_module_t *m);

/* Initialises the component's object classes, in open (one thread): opal_obj_new's first
 * use of a class initialises it behind an unlocked check that two threads' first
 * MPI_Iallreduce would race on (ThreadSanitizer saw it). */
void mca_coll_gpurdma_init_classes(void);

/* Releases requests whose last reference went in a completion callback (where the core's
 * engine is held); called where no gpurdma call is in progress in this thread, and only
 * where the MPI caller may wait (blocking calls, persistent init, MPI_Start, close): the
 * release may tear a communicator down, which waits (bounded) for its peers. */
void mca_coll_gpurdma_release_deferred(void);

/* The previous module's blocking allreduce, through host copies if a buffer is in GPU
 * memory (Open MPI is not CUDA-aware). `why` is for the verbose line. */
int mca_coll_gpurdma_blocking_fallback(mca_coll_gpurdma_module_t *m, const char *why, const void *sbuf, void *rbuf,
                                       gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op);
/* Whether either buffer is GPU memory the previous module cannot touch. */
bool mca_coll_gpurdma_device_buffers(const void *sbuf, const void *rbuf);
/* Why the core handed a nonblocking or persistent call on: before the communicator's
 * set-up, or `otherwise` (coll_gpurdma_request.c). */
const char *mca_coll_gpurdma_declined_why(const mca_coll_gpurdma_module_t *m, const char *otherwise);

/* The MPI error for a core status returned by a starting call, with its level-0 line
 * (the core prints its own failures; this names what it does not). */
int mca_coll_gpurdma_start_error(mca_coll_gpurdma_module_t *m, gpurdma_status_t st);

/* MPI handle -> core enum; false for anything the core does not take. */
bool mca_coll_gpurdma_map_datatype(struct ompi_datatype_t *dtype, gpurdma_dtype_t *out);
bool mca_coll_gpurdma_map_op(struct ompi_op_t *op, gpurdma_op_t *out);
/* Checks once that MPI's predefined types have the layouts the core assumes. */
bool mca_coll_gpurdma_check_layouts(void);

/* The core's parameter table as MCA variables (coll_gpurdma_params.c): registers every
 * row; fills a config with the values given, unchecked (gpurdma_config_validate checks). */
void mca_coll_gpurdma_register_params(void);
void mca_coll_gpurdma_config_from_params(gpurdma_config_t *config);

/* "coll:gpurdma: <message>" on the component's output stream, if level <= coll_gpurdma_verbose
 * (level 0, errors and warnings: always). */
void mca_coll_gpurdma_output(int level, const char *format, ...) __opal_attribute_format__(__printf__, 2, 3);

/* Starts the core context if needed; false (with a verbose reason) if it cannot. */
bool mca_coll_gpurdma_ensure_context(void);
void mca_coll_gpurdma_release_context(void);

END_C_DECLS

#endif /* MCA_COLL_GPURDMA_H */
