/*
 * MPI datatype and op handles -> the core's element types and ops. Only
 * predefined handles map; derived types and user ops return false and go to the
 * previous module.
 */
#include "coll_gpurdma.h"

#include <limits.h>
#include <stddef.h>

#include "ompi/datatype/ompi_datatype.h"

/* MPI extensions (Open MPI 5's shortfloat defines MPIX_C_FLOAT16 there); 4.1 has the
 * header without it, other builds may not have it at all. */
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

typedef struct {
    MPI_Datatype handle;
    gpurdma_dtype_t dtype;
} type_entry_t;

/* Built at first use: the handles are addresses of Open MPI's predefined objects. */
static type_entry_t type_table[64];
static size_t type_count;

static void add(MPI_Datatype handle, gpurdma_dtype_t dtype)
{
    type_table[type_count].handle = handle;
    type_table[type_count].dtype = dtype;
    type_count++;
}

/* The core type with the same size and signedness as C integer type T. */
#define INT_TYPE(T, is_signed)                                         \
    (sizeof(T) == 1   ? ((is_signed) ? GPURDMA_INT8 : GPURDMA_UINT8)   \
     : sizeof(T) == 2 ? ((is_signed) ? GPURDMA_INT16 : GPURDMA_UINT16) \
     : sizeof(T) == 4 ? ((is_signed) ? GPURDMA_INT32 : GPURDMA_UINT32) \
                      : ((is_signed) ? GPURDMA_INT64 : GPURDMA_UINT64))

static void build_type_table(void)
{
    if (type_count) return;
    add(MPI_CHAR, INT_TYPE(char, CHAR_MIN < 0));
    add(MPI_SIGNED_CHAR, GPURDMA_INT8);
    add(MPI_UNSIGNED_CHAR, GPURDMA_UINT8);
    add(MPI_SHORT, INT_TYPE(short, 1));
    add(MPI_UNSIGNED_SHORT, INT_TYPE(unsigned short, 0));
    add(MPI_INT, INT_TYPE(int, 1));
    add(MPI_UNSIGNED, INT_TYPE(unsigned, 0));
    add(MPI_LONG, INT_TYPE(long, 1));
    add(MPI_UNSIGNED_LONG, INT_TYPE(unsigned long, 0));
    add(MPI_LONG_LONG_INT, INT_TYPE(long long, 1));
    add(MPI_LONG_LONG, INT_TYPE(long long, 1));
    add(MPI_UNSIGNED_LONG_LONG, INT_TYPE(unsigned long long, 0));
    add(MPI_INT8_T, GPURDMA_INT8);
    add(MPI_UINT8_T, GPURDMA_UINT8);
    add(MPI_INT16_T, GPURDMA_INT16);
    add(MPI_UINT16_T, GPURDMA_UINT16);
    add(MPI_INT32_T, GPURDMA_INT32);
    add(MPI_UINT32_T, GPURDMA_UINT32);
    add(MPI_INT64_T, GPURDMA_INT64);
    add(MPI_UINT64_T, GPURDMA_UINT64);
    add(MPI_AINT, INT_TYPE(MPI_Aint, 1));
    add(MPI_OFFSET, INT_TYPE(MPI_Offset, 1));
    add(MPI_COUNT, INT_TYPE(MPI_Count, 1));
    add(MPI_C_BOOL, GPURDMA_BOOL);
    add(MPI_BYTE, GPURDMA_BYTE);
    add(MPI_FLOAT, GPURDMA_FLOAT);
    add(MPI_DOUBLE, GPURDMA_DOUBLE);
    add(MPI_LONG_DOUBLE, GPURDMA_LONG_DOUBLE);
    add(MPI_C_COMPLEX, GPURDMA_FLOAT_COMPLEX);
    add(MPI_C_FLOAT_COMPLEX, GPURDMA_FLOAT_COMPLEX);
    add(MPI_C_DOUBLE_COMPLEX, GPURDMA_DOUBLE_COMPLEX);
    add(MPI_C_LONG_DOUBLE_COMPLEX, GPURDMA_LONG_DOUBLE_COMPLEX);
    add(MPI_FLOAT_INT, GPURDMA_FLOAT_INT);
    add(MPI_DOUBLE_INT, GPURDMA_DOUBLE_INT);
    add(MPI_LONG_INT, GPURDMA_LONG_INT);
    add(MPI_2INT, GPURDMA_2INT);
    add(MPI_SHORT_INT, GPURDMA_SHORT_INT);
    add(MPI_LONG_DOUBLE_INT, GPURDMA_LONG_DOUBLE_INT);
#if defined(MPIX_C_FLOAT16)
    /* IEEE binary16 (the same handle as MPIX_SHORT_FLOAT in Open MPI 5). */
    add(MPIX_C_FLOAT16, GPURDMA_FLOAT16);
#endif
}

bool mca_coll_gpurdma_map_datatype(struct ompi_datatype_t *dtype, gpurdma_dtype_t *out)
{
    build_type_table();
    for (size_t i = 0; i < type_count; ++i) {
        if (type_table[i].handle == dtype) {
            *out = type_table[i].dtype;
            return true;
        }
    }
    return false;
}

bool mca_coll_gpurdma_map_op(struct ompi_op_t *op, gpurdma_op_t *out)
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
        if (ops[i].handle == op) {
            *out = ops[i].op;
            return true;
        }
    }
    return false;
}

bool mca_coll_gpurdma_check_layouts(void)
{
    static int checked = 0; /* 0 not yet, 1 good, -1 bad */
    if (checked) return checked > 0;
    build_type_table();
    checked = 1;
    for (size_t i = 0; i < type_count; ++i) {
        /* Internal call: this runs inside MPI_Init, before MPI_Type_get_extent may be used. */
        ptrdiff_t lb = 0, extent = 0;
        if (OMPI_SUCCESS != ompi_datatype_get_extent(type_table[i].handle, &lb, &extent) || lb != 0 ||
            (size_t)extent != gpurdma_dtype_size(type_table[i].dtype)) {
            mca_coll_gpurdma_output(0,
                                    "MPI datatype %zu has extent %ld, the core expects %zu for %s; "
                                    "gpurdma disabled",
                                    i, (long)extent, gpurdma_dtype_size(type_table[i].dtype),
                                    gpurdma_dtype_name(type_table[i].dtype));
            checked = -1;
            break;
        }
    }
    return checked > 0;
}
