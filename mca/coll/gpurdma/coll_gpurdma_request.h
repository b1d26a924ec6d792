/*
 * The component's request (nonblocking and persistent allreduce), shared by
 * coll_gpurdma_request.c (calls the core runs) and coll_gpurdma_staged_request.c (the
 * previous module's calls on host copies of GPU buffers).
 */
#ifndef MCA_COLL_GPURDMA_REQUEST_H
#define MCA_COLL_GPURDMA_REQUEST_H

#include "coll_gpurdma.h"

typedef struct mca_coll_gpurdma_request {
    /* Not an ompi_coll_base_nbc_request_t: Open MPI's MPI_Iallreduce keeps a user op or a
     * derived datatype in one of those (ompi_coll_base_retain_op), and ours only ever take
     * predefined ones (and are complete when inactive persistent ones are given back). */
    ompi_request_t super;
    mca_coll_gpurdma_module_t *module; /* retained */
    gpurdma_request_t *core; /* the core's request; NULL for a blocking-start one */
    int32_t refs; /* the user's handle + 1 while the core has a call in flight (atomic) */
    int freed; /* the user's handle is gone: the callback completes nothing (atomic) */
    /* Calls handed to the core (the caller's thread only), and callbacks that have
     * finished with the request (atomic; the callback's last touch, with release order).
     * Before the caller's thread reuses or frees a completed request it waits until the
     * two agree (await_callbacks): MPI_Test can see the request complete while its
     * callback, in another thread, is still inside ompi_request_complete, and this is
     * also the order, in C11 terms, of the core's writes (result, status) before the
     * caller's next use: Open MPI's completion (a compare-exchange with acquire order,
     * its waiter's loads, none instrumented) does not give it to a thread sanitizer. */
    unsigned long handed;
    unsigned long completions;
    struct mca_coll_gpurdma_request *next_deferred;
    /* A persistent request the core declined whose buffers are in GPU memory (or with no
     * previous persistent allreduce): each start runs the blocking fallback. The
     * datatype and op are retained. */
    bool blocking;
    const char *why;
    const void *sbuf;
    void *rbuf;
    gpurdma_coll_count_t count;
    struct ompi_datatype_t *dtype;
    struct ompi_op_t *op;
    /* The other collectives' blocking-start request: the call (its datatypes and op
     * retained, its counts copied), run by mca_coll_gpurdma_previous_call at each start. */
    mca_coll_gpurdma_call_t *call;
    /* A persistent call the core declined on GPU buffers, where the previous module has
     * the persistent collective: its request on host copies of the buffers
     * (coll_gpurdma_staged_request.c; `call` then holds the call's types and op). */
    ompi_request_t *inner;
} mca_coll_gpurdma_request_t;

/* A new request holding the module; persistent ones inactive and complete. */
mca_coll_gpurdma_request_t *mca_coll_gpurdma_request_new(mca_coll_gpurdma_module_t *m, struct ompi_communicator_t *comm,
                                                         bool persistent);
/* A nonblocking request about to be handed to the core: active before the core has it
 * (MPI_Waitany skips inactive requests), with two references, the handle's and the call's. */
void mca_coll_gpurdma_request_hand_over(mca_coll_gpurdma_request_t *r);
/* A request whose call the core did not start (its callback will never run): released. */
void mca_coll_gpurdma_request_drop_unstarted(mca_coll_gpurdma_request_t *r);
/* Drops a reference; the last one releases the request (deferred to the next shim call
 * when in_callback: the caller may hold the core's engine). */
void mca_coll_gpurdma_request_put(mca_coll_gpurdma_request_t *r, bool in_callback);
/* A call handed on (to the core, or to the previous module) has ended: completes the
 * request unless its handle is freed, and drops the call's reference. */
void mca_coll_gpurdma_request_complete(void *arg, gpurdma_status_t status);

/* coll_gpurdma_staged_request.c: the previous module's nonblocking (persistent) allreduce
 * on host copies of GPU buffers. _iallreduce and _init return MPI errors and set
 * *request (for _iallreduce, the previous module's own request); _start starts a
 * persistent one (MPI_SUCCESS: completed when the previous module's request completes);
 * _release frees what a request holds of it (its destructor). */
int mca_coll_gpurdma_staged_iallreduce(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf,
                                       gpurdma_coll_count_t count, struct ompi_datatype_t *dtype, struct ompi_op_t *op,
                                       struct ompi_communicator_t *comm, ompi_request_t **request);
int mca_coll_gpurdma_staged_allreduce_init(mca_coll_gpurdma_module_t *m, const void *sbuf, void *rbuf,
                                           gpurdma_coll_count_t count, struct ompi_datatype_t *dtype,
                                           struct ompi_op_t *op, struct ompi_communicator_t *comm,
                                           struct ompi_info_t *info, ompi_request_t **request);
/* The same for any collective (coll_gpurdma_collectives.c's call): the previous module's
 * nonblocking call (its request returned) or persistent one (ours returned) on host copies. */
int mca_coll_gpurdma_staged_request(mca_coll_gpurdma_module_t *m, const mca_coll_gpurdma_call_t *call, bool persistent,
                                    struct ompi_info_t *info, ompi_request_t **request);
int mca_coll_gpurdma_staged_start(mca_coll_gpurdma_request_t *r);
void mca_coll_gpurdma_staged_release(mca_coll_gpurdma_request_t *r);

#endif
