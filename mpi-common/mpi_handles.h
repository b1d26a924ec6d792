/*
 * MPI handles -> the core's element types and ops, shared by both front ends: the
 * Open MPI component (mca/coll/gpurdma) and the MPICH-ABI interposer (pmpi/). Each
 * compiles it against its own <mpi.h>, so one list decides, for
 * every MPI, which calls the core takes: only predefined handles map; derived types,
 * user ops and types not listed here go to the other implementation.
 */
#ifndef GPURDMA_MPI_COMMON_MPI_HANDLES_H
#define GPURDMA_MPI_COMMON_MPI_HANDLES_H

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpurdma/gpurdma.h"

/* MPI extensions (Open MPI 5's shortfloat defines MPIX_C_FLOAT16 there); 4.1 has the
 * header without it, other builds may not have it at all. MPICH defines it in mpi.h. */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

typedef struct {
    MPI_Datatype handle;
    gpurdma_dtype_t dtype;
} gpurdma_mpi_type_t;

/* The core type with the same size and signedness as C integer type T. */
#define GPURDMA_MPI_INT_TYPE(T, is_signed)                             \
    (sizeof(T) == 1   ? ((is_signed) ? GPURDMA_INT8 : GPURDMA_UINT8)   \
     : sizeof(T) == 2 ? ((is_signed) ? GPURDMA_INT16 : GPURDMA_UINT16) \
     : sizeof(T) == 4 ? ((is_signed) ? GPURDMA_INT32 : GPURDMA_UINT32) \
                      : ((is_signed) ? GPURDMA_INT64 : GPURDMA_UINT64))

/* The predefined types the core takes; *count set to their number. Built at first use
 * (Open MPI's handles are addresses of its predefined objects). */
static inline const gpurdma_mpi_type_t *gpurdma_mpi_types(size_t *count)
{
    static gpurdma_mpi_type_t table[64];
    static size_t n;
#define GPURDMA_MPI_ADD(h, t)  \
    do {                       \
        table[n].handle = (h); \
        table[n].dtype = (t);  \
        n++;                   \
    } while (0)
    if (0 == n) {
        GPURDMA_MPI_ADD(MPI_CHAR, GPURDMA_MPI_INT_TYPE(char, CHAR_MIN < 0));
        GPURDMA_MPI_ADD(MPI_SIGNED_CHAR, GPURDMA_INT8);
        GPURDMA_MPI_ADD(MPI_UNSIGNED_CHAR, GPURDMA_UINT8);
        GPURDMA_MPI_ADD(MPI_SHORT, GPURDMA_MPI_INT_TYPE(short, 1));
        GPURDMA_MPI_ADD(MPI_UNSIGNED_SHORT, GPURDMA_MPI_INT_TYPE(unsigned short, 0));
        GPURDMA_MPI_ADD(MPI_INT, GPURDMA_MPI_INT_TYPE(int, 1));
        GPURDMA_MPI_ADD(MPI_UNSIGNED, GPURDMA_MPI_INT_TYPE(unsigned, 0));
        GPURDMA_MPI_ADD(MPI_LONG, GPURDMA_MPI_INT_TYPE(long, 1));
        GPURDMA_MPI_ADD(MPI_UNSIGNED_LONG, GPURDMA_MPI_INT_TYPE(unsigned long, 0));
        GPURDMA_MPI_ADD(MPI_LONG_LONG_INT, GPURDMA_MPI_INT_TYPE(long long, 1));
        GPURDMA_MPI_ADD(MPI_LONG_LONG, GPURDMA_MPI_INT_TYPE(long long, 1));
        GPURDMA_MPI_ADD(MPI_UNSIGNED_LONG_LONG, GPURDMA_MPI_INT_TYPE(unsigned long long, 0));
        GPURDMA_MPI_ADD(MPI_INT8_T, GPURDMA_INT8);
        GPURDMA_MPI_ADD(MPI_UINT8_T, GPURDMA_UINT8);
        GPURDMA_MPI_ADD(MPI_INT16_T, GPURDMA_INT16);
        GPURDMA_MPI_ADD(MPI_UINT16_T, GPURDMA_UINT16);
        GPURDMA_MPI_ADD(MPI_INT32_T, GPURDMA_INT32);
        GPURDMA_MPI_ADD(MPI_UINT32_T, GPURDMA_UINT32);
        GPURDMA_MPI_ADD(MPI_INT64_T, GPURDMA_INT64);
        GPURDMA_MPI_ADD(MPI_UINT64_T, GPURDMA_UINT64);
        GPURDMA_MPI_ADD(MPI_AINT, GPURDMA_MPI_INT_TYPE(MPI_Aint, 1));
        GPURDMA_MPI_ADD(MPI_OFFSET, GPURDMA_MPI_INT_TYPE(MPI_Offset, 1));
        GPURDMA_MPI_ADD(MPI_COUNT, GPURDMA_MPI_INT_TYPE(MPI_Count, 1));
        GPURDMA_MPI_ADD(MPI_C_BOOL, GPURDMA_BOOL);
        GPURDMA_MPI_ADD(MPI_BYTE, GPURDMA_BYTE);
        GPURDMA_MPI_ADD(MPI_FLOAT, GPURDMA_FLOAT);
        GPURDMA_MPI_ADD(MPI_DOUBLE, GPURDMA_DOUBLE);
        GPURDMA_MPI_ADD(MPI_LONG_DOUBLE, GPURDMA_LONG_DOUBLE);
        GPURDMA_MPI_ADD(MPI_C_COMPLEX, GPURDMA_FLOAT_COMPLEX);
        GPURDMA_MPI_ADD(MPI_C_FLOAT_COMPLEX, GPURDMA_FLOAT_COMPLEX);
        GPURDMA_MPI_ADD(MPI_C_DOUBLE_COMPLEX, GPURDMA_DOUBLE_COMPLEX);
        GPURDMA_MPI_ADD(MPI_C_LONG_DOUBLE_COMPLEX, GPURDMA_LONG_DOUBLE_COMPLEX);
        GPURDMA_MPI_ADD(MPI_FLOAT_INT, GPURDMA_FLOAT_INT);
        GPURDMA_MPI_ADD(MPI_DOUBLE_INT, GPURDMA_DOUBLE_INT);
        GPURDMA_MPI_ADD(MPI_LONG_INT, GPURDMA_LONG_INT);
        GPURDMA_MPI_ADD(MPI_2INT, GPURDMA_2INT);
        GPURDMA_MPI_ADD(MPI_SHORT_INT, GPURDMA_SHORT_INT);
        GPURDMA_MPI_ADD(MPI_LONG_DOUBLE_INT, GPURDMA_LONG_DOUBLE_INT);
#if defined(MPIX_C_FLOAT16)
        /* IEEE binary16 (the same handle as MPIX_SHORT_FLOAT in Open MPI 5). */
        GPURDMA_MPI_ADD(MPIX_C_FLOAT16, GPURDMA_FLOAT16);
#endif
    }
#undef GPURDMA_MPI_ADD
    *count = n;
    return table;
}

/* MPI datatype handle -> core type; false for anything the core does not take. */
static inline bool gpurdma_mpi_map_datatype(MPI_Datatype handle, gpurdma_dtype_t *out)
{
    size_t n;
    const gpurdma_mpi_type_t *table = gpurdma_mpi_types(&n);
    for (size_t i = 0; i < n; ++i) {
        if (table[i].handle == handle) {
            *out = table[i].dtype;
            return true;
        }
    }
    return false;
}

/* MPI op handle -> core op; false for user-defined ops (and any other). */
static inline bool gpurdma_mpi_map_op(MPI_Op handle, gpurdma_op_t *out)
{
    static const struct {
        MPI_Op handle;
        gpurdma_op_t op;
    } ops[] = {
        {MPI_SUM, GPURDMA_SUM},   {MPI_PROD, GPURDMA_PROD}, {MPI_MIN, GPURDMA_MIN},       {MPI_MAX, GPURDMA_MAX},
        {MPI_LAND, GPURDMA_LAND}, {MPI_LOR, GPURDMA_LOR},   {MPI_LXOR, GPURDMA_LXOR},     {MPI_BAND, GPURDMA_BAND},
        {MPI_BOR, GPURDMA_BOR},   {MPI_BXOR, GPURDMA_BXOR}, {MPI_MAXLOC, GPURDMA_MAXLOC}, {MPI_MINLOC, GPURDMA_MINLOC},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
        if (ops[i].handle == handle) {
            *out = ops[i].op;
            return true;
        }
    }
    return false;
}

#endif /* GPURDMA_MPI_COMMON_MPI_HANDLES_H */
