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

/* pmpi/collectives.c */
__attribute__((visibility("hidden"))) int gpurdma_pmpi_reduce_scatter_block_entry(const void *sbuf, void *rbuf,
                                                                                  int rcount, int dtype, int op,
                                                                                  int comm);
__attribute__((visibility("hidden"))) int gpurdma_pmpi_reduce_scatter_entry(const void *sbuf, void *rbuf,
                                                                            const int *rcounts, int dtype, int op,
                                                                            int comm);
__attribute__((visibility("hidden"))) int gpurdma_pmpi_allgather_entry(const void *sbuf, int scount, int sdtype,
                                                                       void *rbuf, int rcount, int rdtype, int comm);
__attribute__((visibility("hidden"))) int gpurdma_pmpi_bcast_entry(void *buf, int count, int dtype, int root, int comm);
__attribute__((visibility("hidden"))) int gpurdma_pmpi_reduce_entry(const void *sbuf, void *rbuf, int count, int dtype,
                                                                    int op, int root, int comm);

__attribute__((visibility("hidden"))) int gpurdma_pmpi_barrier_entry(int comm);

#endif /* GPURDMA_PMPI_ENTRY_H */
