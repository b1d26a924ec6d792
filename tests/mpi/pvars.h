/*
 * pvars.h: watch gpurdma's MPI_T counters (e.g. "coll_gpurdma_nonblocking_calls").
 *
 * An MPI_T counter handle reads how much the counter grew since the handle was made,
 * so make the handles (pvars_watch) before the calls to be counted and read them
 * (pvars_read) after.  Call MPI_T_init_thread before MPI_Init, and pvars_done and
 * MPI_T_finalize before MPI_Finalize (that unloads the component whose variables
 * these are).
 */
#ifndef GPURDMA_TESTS_MPI_PVARS_H
#define GPURDMA_TESTS_MPI_PVARS_H

#include <mpi.h>

#include <stdbool.h>
#include <string.h>

#define PVARS_MAX 8

typedef struct pvars {
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle[PVARS_MAX];
    bool found[PVARS_MAX];
    int n;
} pvars;

/* Handles for names[0..n): found[i] says whether name i exists (the component is
 * loaded and has it) as a single unsigned long long. */
static __attribute__((unused)) void pvars_watch(pvars *p, const char *const *names, int n)
{
    int num = 0;
    memset(p, 0, sizeof *p);
    p->n = n < PVARS_MAX ? n : PVARS_MAX;
    if (MPI_T_pvar_session_create(&p->session) != MPI_SUCCESS) {
        p->n = 0;
        return;
    }
    MPI_T_pvar_get_num(&num);
    for (int i = 0; i < num; i++) {
        char vname[256], desc[1024];
        int name_len = sizeof vname, desc_len = sizeof desc, verbosity, var_class, bind, readonly, continuous,
            atomic;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_pvar_get_info(i, vname, &name_len, &verbosity, &var_class, &type, &enumtype, desc, &desc_len,
                                &bind, &readonly, &continuous, &atomic) != MPI_SUCCESS ||
            type != MPI_UNSIGNED_LONG_LONG)
            continue;
        for (int k = 0; k < p->n; k++) {
            int count = 0;
            if (p->found[k] || strcmp(vname, names[k]) != 0)
                continue;
            if (MPI_T_pvar_handle_alloc(p->session, i, NULL, &p->handle[k], &count) == MPI_SUCCESS) {
                if (count == 1)
                    p->found[k] = true;
                else
                    MPI_T_pvar_handle_free(p->session, &p->handle[k]);
            }
        }
    }
}

/* Growth of counter k since pvars_watch; 0 if it was not found. */
static __attribute__((unused)) unsigned long long pvars_read(pvars *p, int k)
{
    unsigned long long v = 0;
    if (k < p->n && p->found[k] && MPI_T_pvar_read(p->session, p->handle[k], &v) != MPI_SUCCESS)
        v = 0;
    return v;
}

static __attribute__((unused)) void pvars_done(pvars *p)
{
    for (int k = 0; k < p->n; k++)
        if (p->found[k])
            MPI_T_pvar_handle_free(p->session, &p->handle[k]);
    if (p->n)
        MPI_T_pvar_session_free(&p->session);
    p->n = 0;
}

#endif /* GPURDMA_TESTS_MPI_PVARS_H */
