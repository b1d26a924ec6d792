/*
 * MPI datatype and op handles -> the core's element types and ops, by the list both
 * front ends share (mpi-common/mpi_handles.h). Only predefined handles map; derived
 * types and user ops return false and go to the previous module.
 */
#include "coll_gpurdma.h"

#include <stddef.h>

#include "mpi-common/mpi_handles.h"
#include "ompi/datatype/ompi_datatype.h"

bool mca_coll_gpurdma_map_datatype(struct ompi_datatype_t *dtype, gpurdma_dtype_t *out)
{
    return gpurdma_mpi_map_datatype(dtype, out);
}

bool mca_coll_gpurdma_map_op(struct ompi_op_t *op, gpurdma_op_t *out)
{
    return gpurdma_mpi_map_op(op, out);
}

bool mca_coll_gpurdma_check_layouts(void)
{
    static int checked = 0; /* 0 not yet, 1 good, -1 bad */
    if (checked) return checked > 0;
    size_t type_count;
    const gpurdma_mpi_type_t *type_table = gpurdma_mpi_types(&type_count);
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
