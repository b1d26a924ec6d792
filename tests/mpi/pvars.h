/*
 * pvars.h: read one of gpurdma's MPI_T performance variables (process totals, e.g.
 * "coll_gpurdma_nonblocking_calls") by name.
 *
 * Call MPI_T_init_thread before MPI_Init and MPI_T_finalize before MPI_Finalize (that
 * unloads the component whose variables these are).
 */
#ifndef GPURDMA_TESTS_MPI_PVARS_H
#define GPURDMA_TESTS_MPI_PVARS_H

#include <mpi.h>

#include <string.h>

/* The value of pvar `name` in *value; 0 on success, -1 if there is no such variable
 * (component not loaded, or a build without it) or it cannot be read. */
static __attribute__((unused)) int read_pvar(const char *name, unsigned long long *value)
{
    int n = 0, rc = -1;
    MPI_T_pvar_session session;
    if (MPI_T_pvar_get_num(&n) != MPI_SUCCESS || MPI_T_pvar_session_create(&session) != MPI_SUCCESS)
        return -1;
    for (int i = 0; i < n && rc != 0; i++) {
        char vname[256], desc[1024];
        int name_len = sizeof vname, desc_len = sizeof desc, verbosity, var_class, bind, readonly, continuous,
            atomic, count = 0;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        MPI_T_pvar_handle handle;
        if (MPI_T_pvar_get_info(i, vname, &name_len, &verbosity, &var_class, &type, &enumtype, desc, &desc_len,
                                &bind, &readonly, &continuous, &atomic) != MPI_SUCCESS ||
            strcmp(vname, name) != 0 || type != MPI_UNSIGNED_LONG_LONG)
            continue;
        if (MPI_T_pvar_handle_alloc(session, i, NULL, &handle, &count) != MPI_SUCCESS)
            continue;
        if (count == 1 && MPI_T_pvar_read(session, handle, value) == MPI_SUCCESS) rc = 0;
        MPI_T_pvar_handle_free(session, &handle);
    }
    MPI_T_pvar_session_free(&session);
    return rc;
}

#endif /* GPURDMA_TESTS_MPI_PVARS_H */
