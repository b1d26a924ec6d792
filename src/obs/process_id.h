// Who this process is, for dump and trace files: its host, and its rank and job as
// the launcher says (Open MPI, PMIx, Slurm or PMI variables; "" where none is set).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace gpurdma::obs {

inline const char *first_env(std::initializer_list<const char *> names)
{
    for (const char *n : names)
        if (const char *v = std::getenv(n); v && *v) return v;
    return "";
}

inline std::string host_name()
{
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) return "unknown";
    return host;
}

inline const char *world_rank_text()
{
    return first_env({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
}

inline const char *world_size_text()
{
    return first_env({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
}

inline const char *job_text()
{
    return first_env({"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "SLURM_JOB_ID", "PMI_JOBID"});
}

}  // namespace gpurdma::obs
