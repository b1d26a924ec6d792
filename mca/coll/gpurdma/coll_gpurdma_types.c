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

/* Internal call: this runs inside MPI_Init, before MPI_Type_get_extent may be used. */
static bool extent_of(MPI_Datatype handle, ptrdiff_t *lb, ptrdiff_t *extent)
{
    return OMPI_SUCCESS == ompi_datatype_get_extent(handle, lb, extent);
}

bool mca_coll_gpurdma_check_layouts(void)
{
    static int checked = 0; /* 0 not yet, 1 good, -1 bad */
    if (checked) return checked > 0;
    gpurdma_mpi_type_t bad;
    ptrdiff_t extent = 0;
    checked = gpurdma_mpi_check_layouts(extent_of, &bad, &extent) ? 1 : -1;
    if (checked < 0)
        mca_coll_gpurdma_output(0, "an MPI datatype has extent %ld, the core expects %zu for %s; gpurdma disabled",
                                (long)extent, gpurdma_dtype_size(bad.dtype), gpurdma_dtype_name(bad.dtype));
    return checked > 0;
}
