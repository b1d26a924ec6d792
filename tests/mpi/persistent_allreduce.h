/* Persistent allreduce, where the MPI has it: MPI-4's MPI_Allreduce_init (Open MPI 5
 * has it although it reports MPI 3.1), else Open MPI 4.1's MPIX_Allreduce_init
 * extension, if built. HAVE_PERSISTENT says which; ALLREDUCE_INIT is undefined
 * without one. */
#ifndef GPURDMA_TESTS_PERSISTENT_ALLREDUCE_H
#define GPURDMA_TESTS_PERSISTENT_ALLREDUCE_H

#include <mpi.h>

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_PERSISTENT 1
#define PERSISTENT_API "MPI_Allreduce_init"
#define ALLREDUCE_INIT MPI_Allreduce_init
#else
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define HAVE_PERSISTENT 1
#define PERSISTENT_API "MPIX_Allreduce_init"
#define ALLREDUCE_INIT MPIX_Allreduce_init
#else
#define HAVE_PERSISTENT 0
#define PERSISTENT_API "none"
#endif
#endif

#endif
