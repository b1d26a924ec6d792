/*
 * Between the exported entry points (entry.c, compiled without <mpi.h>) and the
 * implementation (allreduce.c, compiled against the MPICH-ABI <mpi.h>): handles as
 * MPICH's ints, counts as 64-bit. allreduce.c checks that these are the ABI's types.
 */
#ifndef GPURDMA_PMPI_ENTRY_H
#define GPURDMA_PMPI_ENTRY_H

#include <stdint.h>

__attribute__((visibility("hidden"))) int gpurdma_pmpi_allreduce_entry(const void *sbuf, void *rbuf, int64_t count,
                                                                       int dtype, int op, int comm, int large_count);

#endif /* GPURDMA_PMPI_ENTRY_H */
