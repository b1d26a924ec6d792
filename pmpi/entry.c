/*
 * The library's only exported symbols: MPI_Allreduce and MPI_Allreduce_c, and the blocking
 * MPI_Reduce_scatter_block, MPI_Reduce_scatter, MPI_Allgather, MPI_Bcast, MPI_Reduce and
 * MPI_Barrier.
 *
 * They are written without <mpi.h> and take the handles pointer-sized, so that the
 * library can refuse cleanly when it is preloaded into a program of another ABI
 * (Open MPI, whose handles are pointers): it then prints one line and hands every call,
 * arguments untouched, to that MPI's own MPI_Allreduce. In an MPICH-ABI process the
 * handles are ints (the low half of the register; the rest is not looked at).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pmpi/entry.h"

/* The other ABI's MPI_Allreduce and MPI_Allreduce_c: handles as pointers. */
typedef int (*pointer_allreduce_t)(const void *, void *, int, void *, void *, void *);
typedef int (*pointer_allreduce_c_t)(const void *, void *, int64_t, void *, void *, void *);

static pthread_once_t abi_checked = PTHREAD_ONCE_INIT;
static const char *other_abi; /* NULL: this process's MPI has the MPICH ABI */
static pointer_allreduce_t other_allreduce;
static pointer_allreduce_c_t other_allreduce_c;
/* The other collectives of the other ABI (handles as pointers). */
static int (*other_reduce_scatter_block)(const void *, void *, int, void *, void *, void *);
static int (*other_reduce_scatter)(const void *, void *, const int *, void *, void *, void *);
static int (*other_allgather)(const void *, int, void *, void *, int, void *, void *);
static int (*other_bcast)(void *, int, void *, int, void *);
static int (*other_reduce)(const void *, void *, int, void *, void *, int, void *);
static int (*other_barrier)(void *);

/* Run at the first call, when the program's MPI is surely loaded (it may be dlopen'ed). */
static void check_abi(void)
{
    /* Open MPI's predefined communicator: a symbol no MPICH-ABI library has. */
    if (NULL == dlsym(RTLD_DEFAULT, "ompi_mpi_comm_world")) return;
    other_abi = "Open MPI";
    other_allreduce = (pointer_allreduce_t)dlsym(RTLD_NEXT, "MPI_Allreduce");
    other_allreduce_c = (pointer_allreduce_c_t)dlsym(RTLD_NEXT, "MPI_Allreduce_c");
    *(void **)&other_reduce_scatter_block = dlsym(RTLD_NEXT, "MPI_Reduce_scatter_block");
    *(void **)&other_reduce_scatter = dlsym(RTLD_NEXT, "MPI_Reduce_scatter");
    *(void **)&other_allgather = dlsym(RTLD_NEXT, "MPI_Allgather");
    *(void **)&other_bcast = dlsym(RTLD_NEXT, "MPI_Bcast");
    *(void **)&other_reduce = dlsym(RTLD_NEXT, "MPI_Reduce");
    *(void **)&other_barrier = dlsym(RTLD_NEXT, "MPI_Barrier");
    /* One line per host: its first local process says it. */
    const char *local_rank = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (NULL == local_rank || 0 == atoi(local_rank))
        fprintf(stderr,
                "pmpi:gpurdma: libgpurdma_pmpi.so is built for the MPICH ABI (integer handles) but this process "
                "runs %s (pointer handles): disabled, its collectives go straight to %s's own "
                "(use its coll/gpurdma component instead)\n",
                other_abi, other_abi);
}

/* MPI_ERR_OTHER's value differs between MPIs; any nonzero code is an error in all. */
enum { NOT_FORWARDED = 16 };

__attribute__((visibility("default"))) int MPI_Allreduce(const void *sbuf, void *rbuf, int count, intptr_t dtype,
                                                         intptr_t op, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_allreduce ? other_allreduce(sbuf, rbuf, count, (void *)dtype, (void *)op, (void *)comm)
                               : NOT_FORWARDED;
    return gpurdma_pmpi_allreduce_entry(sbuf, rbuf, count, (int)dtype, (int)op, (int)comm, 0);
}

#if GPURDMA_PMPI_LARGE_COUNT
__attribute__((visibility("default"))) int MPI_Allreduce_c(const void *sbuf, void *rbuf, int64_t count, intptr_t dtype,
                                                           intptr_t op, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_allreduce_c ? other_allreduce_c(sbuf, rbuf, count, (void *)dtype, (void *)op, (void *)comm)
                                 : NOT_FORWARDED;
    return gpurdma_pmpi_allreduce_entry(sbuf, rbuf, count, (int)dtype, (int)op, (int)comm, 1);
}
#endif

__attribute__((visibility("default"))) int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount,
                                                                    intptr_t dtype, intptr_t op, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_reduce_scatter_block
                   ? other_reduce_scatter_block(sbuf, rbuf, rcount, (void *)dtype, (void *)op, (void *)comm)
                   : NOT_FORWARDED;
    return gpurdma_pmpi_reduce_scatter_block_entry(sbuf, rbuf, rcount, (int)dtype, (int)op, (int)comm);
}

__attribute__((visibility("default"))) int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts,
                                                              intptr_t dtype, intptr_t op, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_reduce_scatter ? other_reduce_scatter(sbuf, rbuf, rcounts, (void *)dtype, (void *)op, (void *)comm)
                                    : NOT_FORWARDED;
    return gpurdma_pmpi_reduce_scatter_entry(sbuf, rbuf, rcounts, (int)dtype, (int)op, (int)comm);
}

__attribute__((visibility("default"))) int MPI_Allgather(const void *sbuf, int scount, intptr_t sdtype, void *rbuf,
                                                         int rcount, intptr_t rdtype, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_allgather
                   ? other_allgather(sbuf, scount, (void *)sdtype, rbuf, rcount, (void *)rdtype, (void *)comm)
                   : NOT_FORWARDED;
    return gpurdma_pmpi_allgather_entry(sbuf, scount, (int)sdtype, rbuf, rcount, (int)rdtype, (int)comm);
}

__attribute__((visibility("default"))) int MPI_Bcast(void *buf, int count, intptr_t dtype, int root, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi) return other_bcast ? other_bcast(buf, count, (void *)dtype, root, (void *)comm) : NOT_FORWARDED;
    return gpurdma_pmpi_bcast_entry(buf, count, (int)dtype, root, (int)comm);
}

__attribute__((visibility("default"))) int MPI_Reduce(const void *sbuf, void *rbuf, int count, intptr_t dtype,
                                                      intptr_t op, int root, intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi)
        return other_reduce ? other_reduce(sbuf, rbuf, count, (void *)dtype, (void *)op, root, (void *)comm)
                            : NOT_FORWARDED;
    return gpurdma_pmpi_reduce_entry(sbuf, rbuf, count, (int)dtype, (int)op, root, (int)comm);
}

__attribute__((visibility("default"))) int MPI_Barrier(intptr_t comm)
{
    pthread_once(&abi_checked, check_abi);
    if (other_abi) return other_barrier ? other_barrier((void *)comm) : NOT_FORWARDED;
    return gpurdma_pmpi_barrier_entry((int)comm);
}
