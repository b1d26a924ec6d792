/*
 * libgpurdma_pmpi: gpurdma's allreduce for MPICH-ABI MPIs (MPICH, Intel MPI, Cray
 * MPICH, MVAPICH) through the MPI profiling interface. The library defines
 * MPI_Allreduce (and MPI_Allreduce_c), MPI_Reduce_scatter_block, MPI_Reduce_scatter,
 * MPI_Allgather, MPI_Bcast and MPI_Reduce, and nothing else; everything else here is
 * hidden. It takes the same decisions as the Open MPI component (mca/coll/gpurdma):
 * the handle maps are shared (mpi-common/mpi_handles.h), the rest is the core's.
 */
#ifndef GPURDMA_PMPI_INTERPOSER_H
#define GPURDMA_PMPI_INTERPOSER_H

#include <mpi.h>
#include <stdbool.h>

#include "gpurdma/gpurdma.h"

#define PMPI_HIDDEN __attribute__((visibility("hidden")))

/* The MPI_Allreduce / MPI_Allreduce_c behind the exported entry points (entry.c). */
PMPI_HIDDEN int gpurdma_pmpi_allreduce(const void *sbuf, void *rbuf, MPI_Count count, MPI_Datatype dtype, MPI_Op op,
                                       MPI_Comm comm, bool large_count);

/* ---- per-communicator state (state.c) ---- */
typedef struct pmpi_comm {
    MPI_Comm comm;
    gpurdma_comm_t *core; /* NULL: never ours (an inter-communicator), or released at MPI_Finalize */
    char name[96];
    struct pmpi_comm *next; /* every state made (state.c), for MPI_Finalize */
} pmpi_comm_t;

/* The MPI error for a core failure, through the communicator's error handler (allreduce.c). */
PMPI_HIDDEN int gpurdma_pmpi_core_error(const pmpi_comm_t *c, gpurdma_status_t st);

/* This communicator's state, made on its first call (a communicator attribute, freed
 * with it); NULL when gpurdma is off, could not start, or is shutting down. */
PMPI_HIDDEN pmpi_comm_t *pmpi_comm_state(MPI_Comm comm);

/* Whether GPU buffers are recognised (GPURDMA_CUDA or GPURDMA_ROCM); valid once a state was asked for. */
PMPI_HIDDEN bool pmpi_gpu_buffers_enabled(void);
/* Whether the predefined types have the layouts the core assumes (Fortran types that
 * do not are dropped); once, before the first call is mapped (pmpi/allreduce.c). */
PMPI_HIDDEN bool pmpi_layouts_match(void);

/* ---- parameters from the environment (params.c) ---- */
/* GPURDMA_PRIORITY: 0 turns the library off (every call goes to PMPI_Allreduce). */
PMPI_HIDDEN int pmpi_priority(void);
/* The core's parameter table read from GPURDMA_<NAME>, unchecked (gpurdma_config_validate
 * checks); a value that is not a number gets one warning and the default. */
PMPI_HIDDEN void pmpi_config_from_environment(gpurdma_config_t *config);

/* ---- output (log.c) ---- */
PMPI_HIDDEN void pmpi_set_verbose(int verbose);
/* Called once the process's rank is known: it then prefixes every line. */
PMPI_HIDDEN void pmpi_set_rank(int rank);
/* "[host:pid rank R] pmpi:gpurdma: <message>" on stderr if level <= GPURDMA_VERBOSE (level
 * 0, errors and warnings: always). The core's "coll_gpurdma_<name>" reads GPURDMA_<NAME>. */
PMPI_HIDDEN void pmpi_output(int level, const char *format, ...) __attribute__((format(printf, 2, 3)));
PMPI_HIDDEN void pmpi_log(int level, const char *message);

#endif /* GPURDMA_PMPI_INTERPOSER_H */
