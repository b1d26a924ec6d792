/*
 * coll/gpurdma: the differences between the Open MPI versions the shim builds against,
 * chosen by OMPI_MAJOR_VERSION of the headers it is compiled with (mpi.h). The
 * component must be built against the exact Open MPI it is loaded into: the coll
 * structs differ between majors (and even between 5.0 releases), and Open MPI refuses
 * a component of another framework version when it scans its directory.
 *
 *            component / module   allreduce count   c_name     cid                 functions installed by
 *   4.1.x    2.0.0 / 2.3.0        int               char[]     c_contextid         the base, after enable
 *   5.0.x    2.4.0 / 2.4.0        int               char *     local cid accessor  the base, after enable
 *   main/6   3.0.0 / 3.0.0        size_t            char *     local cid accessor  the module, in enable;
 *                                                                                  restored in disable
 *
 * The request side is the same in all three: ompi_request_t's fields, OMPI_REQUEST_INIT/FINI,
 * ompi_request_complete, &ompi_request_empty (complete, freed by MPI_Wait into
 * MPI_REQUEST_NULL), the iallreduce and allreduce_init signatures (with the count type above),
 * and MPI_Iallreduce/MPI(X)_Allreduce_init calling ompi_coll_base_retain_op on what the module
 * returns (a no-op for a complete request and for predefined ops and types, the only ones the
 * shim's own requests take). Persistent allreduce is MPIX_Allreduce_init (mpiext pcollreq) in
 * 4.1 and MPI_Allreduce_init in 5.0 and later; both reach coll_allreduce_init.
 *
 * 4.1 and 5.0 are built and tested. The 6.x branch follows Open MPI main's coll.h
 * (read, not compiled: there is no 6.x to build against here).
 */
#ifndef MCA_COLL_GPURDMA_COMPAT_H
#define MCA_COLL_GPURDMA_COMPAT_H

#include "ompi_config.h"

#include <limits.h>
#include <stdint.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/runtime/mpiruntime.h"

#if !defined(OMPI_MAJOR_VERSION)
#error "mpi.h does not define OMPI_MAJOR_VERSION: not Open MPI's headers"
#elif OMPI_MAJOR_VERSION == 4
#define GPURDMA_COLL_COMPONENT_T mca_coll_base_component_2_0_0_t
#define GPURDMA_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_0_0
#define GPURDMA_COMPONENT_DECLSPEC OMPI_MODULE_DECLSPEC
#elif OMPI_MAJOR_VERSION == 5
#define GPURDMA_COLL_COMPONENT_T mca_coll_base_component_2_4_0_t
#define GPURDMA_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_2_4_0
#define GPURDMA_COMPONENT_DECLSPEC OMPI_DECLSPEC
#elif OMPI_MAJOR_VERSION == 6
#define GPURDMA_COLL_COMPONENT_T mca_coll_base_component_3_0_0_t
#define GPURDMA_COLL_BASE_VERSION MCA_COLL_BASE_VERSION_3_0_0
#define GPURDMA_COMPONENT_DECLSPEC OMPI_DECLSPEC
#else
#error "coll/gpurdma supports Open MPI 4.1.x and 5.0.x (6.x untested); this is another major version"
#endif

/* Counts in the coll function signatures (allreduce, allgather). */
#if OMPI_MAJOR_VERSION >= 6
typedef size_t gpurdma_coll_count_t;
#define GPURDMA_COLL_COUNT_MAX SIZE_MAX
/* The module installs its functions in enable and restores the previous ones in disable. */
#define GPURDMA_COLL_MODULE_INSTALLS 1
#else
typedef int gpurdma_coll_count_t;
#define GPURDMA_COLL_COUNT_MAX INT_MAX
#define GPURDMA_COLL_MODULE_INSTALLS 0
#endif

/* A communicator's name for messages: 4.1 keeps it in an array, 5.x may leave the
 * pointer NULL until MPI_Comm_set_name. */
static inline const char *gpurdma_comm_name(const struct ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    return comm->c_name ? comm->c_name : "";
#else
    return comm->c_name;
#endif
}

/* The communicator's local context id (5.x made c_contextid an extended-cid struct). */
static inline unsigned gpurdma_comm_cid(const struct ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    return (unsigned)ompi_comm_get_local_cid(comm);
#else
    return (unsigned)comm->c_contextid;
#endif
}

/* Whether several threads may call MPI at once. MPI_Init_thread sets ompi_mpi_thread_multiple
 * (4.1, 5.0, main); a 5.x session initialised at MPI_THREAD_MULTIPLE turns on opal's threads
 * without it. */
static inline bool gpurdma_mpi_thread_multiple(void)
{
    return ompi_mpi_thread_multiple || opal_using_threads();
}

#endif /* MCA_COLL_GPURDMA_COMPAT_H */
