#!/usr/bin/env bash
# The main job: set up (install what is missing, build), then run the allreduce
# benchmark on 2 and 4 local ranks, gpurdma beside Open MPI's default (tuned) and han.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bash "$top/contrib/setup.sh"
exec python3 "$top/contrib/bench.py" --np 2,4 "$@"
