/* Persistent forms of the collectives beyond allreduce, where the MPI has them:
 * MPI-4's MPI_Bcast_init, MPI_Reduce_init, MPI_Reduce_scatter_init,
 * MPI_Reduce_scatter_block_init and MPI_Allgather_init (MPICH 4, Open MPI 5), else
 * Open MPI 4.1's MPIX_ forms from the pcollreq extension (<mpi-ext.h>), the same
 * choice persistent_allreduce.h makes for MPI_Allreduce_init.  HAVE_PERSISTENT says
 * whether there are any; the *_INIT names are undefined without them. */
#ifndef GPURDMA_TESTS_PERSISTENT_COLL_H
#define GPURDMA_TESTS_PERSISTENT_COLL_H

#include "persistent_allreduce.h"

#if HAVE_PERSISTENT
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define BCAST_INIT MPI_Bcast_init
#define REDUCE_INIT MPI_Reduce_init
#define REDUCE_SCATTER_INIT MPI_Reduce_scatter_init
#define REDUCE_SCATTER_BLOCK_INIT MPI_Reduce_scatter_block_init
#define ALLGATHER_INIT MPI_Allgather_init
#else
#define BCAST_INIT MPIX_Bcast_init
#define REDUCE_INIT MPIX_Reduce_init
#define REDUCE_SCATTER_INIT MPIX_Reduce_scatter_init
#define REDUCE_SCATTER_BLOCK_INIT MPIX_Reduce_scatter_block_init
#define ALLGATHER_INIT MPIX_Allgather_init
#endif
#endif

#endif
