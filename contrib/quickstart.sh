#!/usr/bin/env bash
# The main job: set up (install what is missing, build), then run the allreduce
# benchmark on 2 and 4 local ranks, gpurdma beside Open MPI's default (tuned) and han.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
GPURDMA_SETUP_PLOT=1 bash "$top/contrib/setup.sh"
# Debian's python3 (with python3-matplotlib from setup.sh), not whatever python3 is first on PATH.
exec /usr/bin/python3 "$top/contrib/bench.py" --np 2,4 "$@"
