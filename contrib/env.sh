# Source this to run MPI programs with gpurdma from the build tree:
#   . contrib/env.sh && mpirun --mca coll_gpurdma_priority 100 ./app
# Open MPI's own component directory must come first in the path (setting the
# variable replaces the default list).
# GPURDMA_BUILD selects another build directory (default: build/).
_gpurdma_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):${GPURDMA_BUILD:-$_gpurdma_top/build}/component"
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
unset _gpurdma_top
