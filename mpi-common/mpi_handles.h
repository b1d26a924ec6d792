/*
 * MPI handles -> the core's element types and ops, shared by both front ends: the
 * Open MPI component (mca/coll/gpurdma) and the MPICH-ABI interposer (pmpi/). Each
 * compiles it against its own <mpi.h>, so one list decides, for
 * every MPI, which calls the core takes: only predefined handles map; derived types,
 * user ops and types not listed here go to the other implementation.
 * The type list is a static of these inline functions, one per translation unit: each
 * front end includes this from one file only, so that the layout check's verdict and
 * the mapping see the same list.
 */
#ifndef GPURDMA_MPI_COMMON_MPI_HANDLES_H
#define GPURDMA_MPI_COMMON_MPI_HANDLES_H

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    /* A Fortran type: the MPI may lack it (built without Fortran) or give it another
     * size (default kinds changed at build time); then it is dropped, not fatal. */
    bool optional;
} gpurdma_mpi_type_t;

/* The core type with the same size and signedness as C integer type T. */
#define GPURDMA_MPI_INT_TYPE(T, is_signed)                             \
    (sizeof(T) == 1   ? ((is_signed) ? GPURDMA_INT8 : GPURDMA_UINT8)   \
     : sizeof(T) == 2 ? ((is_signed) ? GPURDMA_INT16 : GPURDMA_UINT16) \
     : sizeof(T) == 4 ? ((is_signed) ? GPURDMA_INT32 : GPURDMA_UINT32) \
                      : ((is_signed) ? GPURDMA_INT64 : GPURDMA_UINT64))

/* How many entries of the list are in use. */
static inline size_t *gpurdma_mpi_type_count_slot(void)
{
    static size_t n;
    return &n;
}

/* A hash index over the kept entries, for the per-call lookup (a linear scan of some 60
 * handles took ~26 compares for MPI_FLOAT, on the latency path): slot -> entry + 1, 0
 * empty. Built once by the layout check, before any call maps a type. */
enum { GPURDMA_MPI_TYPE_SLOTS = 256 };
static inline unsigned char *gpurdma_mpi_type_index(void)
{
    static unsigned char index[GPURDMA_MPI_TYPE_SLOTS];
    return index;
}

static inline bool *gpurdma_mpi_type_index_built(void)
{
    static bool built;
    return &built;
}

/* Handles are pointers (Open MPI) or encoded ints (MPICH): Fibonacci hashing spreads both. */
static inline unsigned gpurdma_mpi_type_slot(MPI_Datatype handle)
{
    return (unsigned)(((unsigned long long)(uintptr_t)handle * 0x9E3779B97F4A7C15ull) >> 56);
}

/* The first `count` entries of `table` are the ones kept. */
static inline void gpurdma_mpi_set_type_count(const gpurdma_mpi_type_t *table, size_t count)
{
    *gpurdma_mpi_type_count_slot() = count;
    unsigned char *index = gpurdma_mpi_type_index();
    for (unsigned s = 0; s < GPURDMA_MPI_TYPE_SLOTS; ++s) index[s] = 0;
    for (size_t i = 0; i < count; ++i) {
        unsigned s = gpurdma_mpi_type_slot(table[i].handle);
        while (index[s]) s = (s + 1) % GPURDMA_MPI_TYPE_SLOTS;
        index[s] = (unsigned char)(i + 1);
    }
    *gpurdma_mpi_type_index_built() = true;
}

/* The predefined types the core takes; *count set to their number. Built at first use
 * (Open MPI's handles are addresses of its predefined objects). */
static inline const gpurdma_mpi_type_t *gpurdma_mpi_types(size_t *count)
{
    static gpurdma_mpi_type_t table[64];
    size_t n = *gpurdma_mpi_type_count_slot();
#define GPURDMA_MPI_ADD_AS(h, t, opt) \
    do {                              \
        table[n].handle = (h);        \
        table[n].dtype = (t);         \
        table[n].optional = (opt);    \
        n++;                          \
    } while (0)
#define GPURDMA_MPI_ADD(h, t) GPURDMA_MPI_ADD_AS(h, t, false)
#define GPURDMA_MPI_ADD_FORTRAN(h, t) GPURDMA_MPI_ADD_AS(h, t, true)
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
        /* Fortran's numeric types at their usual sizes (checked at start, see
         * gpurdma_mpi_check_layouts); MPI_2INTEGER is laid out as MPI_2INT there. */
        GPURDMA_MPI_ADD_FORTRAN(MPI_INTEGER, GPURDMA_INT32);
        GPURDMA_MPI_ADD_FORTRAN(MPI_INTEGER1, GPURDMA_INT8);
        GPURDMA_MPI_ADD_FORTRAN(MPI_INTEGER2, GPURDMA_INT16);
        GPURDMA_MPI_ADD_FORTRAN(MPI_INTEGER4, GPURDMA_INT32);
        GPURDMA_MPI_ADD_FORTRAN(MPI_INTEGER8, GPURDMA_INT64);
        GPURDMA_MPI_ADD_FORTRAN(MPI_REAL, GPURDMA_FLOAT);
        GPURDMA_MPI_ADD_FORTRAN(MPI_REAL4, GPURDMA_FLOAT);
        GPURDMA_MPI_ADD_FORTRAN(MPI_REAL8, GPURDMA_DOUBLE);
        GPURDMA_MPI_ADD_FORTRAN(MPI_DOUBLE_PRECISION, GPURDMA_DOUBLE);
        GPURDMA_MPI_ADD_FORTRAN(MPI_COMPLEX, GPURDMA_FLOAT_COMPLEX);
        GPURDMA_MPI_ADD_FORTRAN(MPI_COMPLEX8, GPURDMA_FLOAT_COMPLEX);
        GPURDMA_MPI_ADD_FORTRAN(MPI_COMPLEX16, GPURDMA_DOUBLE_COMPLEX);
        GPURDMA_MPI_ADD_FORTRAN(MPI_DOUBLE_COMPLEX, GPURDMA_DOUBLE_COMPLEX);
        GPURDMA_MPI_ADD_FORTRAN(MPI_2INTEGER, GPURDMA_2INT);
#if defined(MPIX_C_FLOAT16)
        /* IEEE binary16 (the same handle as MPIX_SHORT_FLOAT in Open MPI 5). */
        GPURDMA_MPI_ADD(MPIX_C_FLOAT16, GPURDMA_FLOAT16);
#endif
        *gpurdma_mpi_type_count_slot() = n;
    }
#undef GPURDMA_MPI_ADD_FORTRAN
#undef GPURDMA_MPI_ADD
#undef GPURDMA_MPI_ADD_AS
    *count = n;
    return table;
}

/* How an MPI reports a predefined type's lower bound and extent (each front end asks
 * its own way: inside MPI_Init, or through PMPI). */
typedef bool (*gpurdma_mpi_extent_fn)(MPI_Datatype handle, ptrdiff_t *lb, ptrdiff_t *extent);

/* Checks every listed type's layout against the core's, once (before any call maps a
 * type). A C type that differs means the core cannot serve this MPI: false, with the
 * entry in *bad and its extent in *bad_extent. A Fortran type that is missing or of
 * another size is dropped from the list: its calls go to the other implementation. */
static inline bool gpurdma_mpi_check_layouts(gpurdma_mpi_extent_fn extent_of, gpurdma_mpi_type_t *bad,
                                             ptrdiff_t *bad_extent)
{
    size_t n;
    gpurdma_mpi_type_t *table = (gpurdma_mpi_type_t *)gpurdma_mpi_types(&n);
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
        ptrdiff_t lb = 0, extent = 0;
        const bool present = MPI_DATATYPE_NULL != table[i].handle;
        const bool fits = present && extent_of(table[i].handle, &lb, &extent) && 0 == lb &&
                          (size_t)extent == gpurdma_dtype_size(table[i].dtype);
        if (fits) {
            table[kept++] = table[i];
        } else if (!table[i].optional) {
            *bad = table[i];
            *bad_extent = extent;
            return false;
        }
    }
    gpurdma_mpi_set_type_count(table, kept);
    return true;
}

/* MPI datatype handle -> core type; false for anything the core does not take. */
static inline bool gpurdma_mpi_map_datatype(MPI_Datatype handle, gpurdma_dtype_t *out)
{
    size_t n;
    const gpurdma_mpi_type_t *table = gpurdma_mpi_types(&n);
    if (*gpurdma_mpi_type_index_built()) {
        const unsigned char *index = gpurdma_mpi_type_index();
        for (unsigned s = gpurdma_mpi_type_slot(handle); index[s]; s = (s + 1) % GPURDMA_MPI_TYPE_SLOTS) {
            if (table[index[s] - 1].handle == handle) {
                *out = table[index[s] - 1].dtype;
                return true;
            }
        }
        return false;
    }
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
