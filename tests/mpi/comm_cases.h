/*
 * The communicators the MPI checks run on, shared by allreduce_check and
 * nonblocking_check: the naming of one (errors returned, "name(size N)") and the
 * ones that need a few MPI calls to build.  Include after check_common.h (xmalloc).
 */
#ifndef GPURDMA_TESTS_COMM_CASES_H
#define GPURDMA_TESTS_COMM_CASES_H

#include <mpi.h>
#include <stdio.h>

/* Sets errors to return on `c` and fills *rank, *size and `name` ("dup(size 4)").
 * On MPI_COMM_NULL (a rank outside it): rank -1, size 0, the bare name. */
static __attribute__((unused)) void describe_comm(MPI_Comm c, const char *base, char *name, size_t name_size,
                                                  int *rank, int *size)
{
    *rank = -1;
    *size = 0;
    snprintf(name, name_size, "%s", base);
    if (c == MPI_COMM_NULL)
        return;
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c, rank);
    MPI_Comm_size(c, size);
    snprintf(name, name_size, "%s(size %d)", base, *size);
}

/* All ranks of world but the last, in reverse order (MPI_Comm_create_group, so only
 * its members call it); MPI_COMM_NULL on the last rank and on a single rank. */
static __attribute__((unused)) MPI_Comm create_reversed_subset(void)
{
    int rank, size;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || rank == size - 1)
        return c;
    MPI_Group wg, g;
    int *ranks = xmalloc((size_t)size * sizeof *ranks);
    for (int i = 0; i < size - 1; i++)
        ranks[i] = size - 2 - i;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, size - 1, ranks, &g);
    MPI_Comm_create_group(MPI_COMM_WORLD, g, 7, &c);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    free(ranks);
    return c;
}

#endif
