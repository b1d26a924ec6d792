# Source this to run MPI programs with gpurdma from the build tree:
#   . contrib/env.sh && mpirun --mca coll_gpurdma_priority 100 ./app
# Open MPI's own component directory must come first in the path (setting the
# variable replaces the default list).
# GPURDMA_BUILD selects another build directory (default: build/).
_gpurdma_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export OMPI_MCA_mca_base_component_path="$(ompi_info --parsable --path pkglibdir | sed 's/^path:pkglibdir://'):${GPURDMA_BUILD:-$_gpurdma_top/build}/component"
# Open MPI 5: PMIx, in every process, reads the same path and says of each file there
# that is not a PMIx plugin "... has bad prefix - expected: pmix_mca_": keep PMIx on its
# own plugin directory.
case $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p') in
5.* | 6.*)
    _gpurdma_pmix=$(pkg-config --variable=libdir pmix 2>/dev/null)
    if [ -n "$_gpurdma_pmix" ] && [ -d "$_gpurdma_pmix/pmix" ] && [ -z "${PMIX_MCA_mca_base_component_path:-}" ]; then
        export PMIX_MCA_mca_base_component_path="$_gpurdma_pmix/pmix"
    fi
    unset _gpurdma_pmix
    ;;
esac
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
unset _gpurdma_top
