#!/usr/bin/env bash
# Where the k = 0 steps' time goes at temperature 1.5, batch 64 (three device calls, one per script, each after the build).
set -uo pipefail
STAGES=none bash scripts/gpu_check.sh > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
d=docs/gpu/longer_cells_1127
timeout 240 python3 $d/kernels_k0_vs_adaptive.py 64 2>&1 | grep -v Loading | tee $OUT/kernels_k0_vs_adaptive_b64.txt
timeout 240 python3 $d/graph_launch_by_config.py 2>&1 | grep -v Loading | tee $OUT/graph_launch_by_config.txt
{ nvidia-smi topo -m; lscpu | grep -i -E "numa|model name|^cpu\(s\)|socket"; } 2>&1 | tee $OUT/topology.txt
for run in free free2; do timeout 100 python3 $d/engine_instances.py $run 2>&1 | grep ms/step; done | tee $OUT/engine_instances.txt
timeout 100 taskset -c 0-15 python3 $d/engine_instances.py taskset 2>&1 | grep ms/step | tee -a $OUT/engine_instances.txt
