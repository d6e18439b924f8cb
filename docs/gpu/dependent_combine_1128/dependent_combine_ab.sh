set -uo pipefail
out=${OUT:-/tmp/x}
t0=$(date +%s); ts() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $out/exp.txt; }
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cat $out/environment.txt
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
files="cpp/kernels/cuda/mla_attention.cu cpp/kernels/cuda/mla_attention_wgmma.cu"
use() { for f in $files; do cp .ab/$1/$f $f; done; python3 -m pip install --no-build-isolation --no-deps -e . > /tmp/rebuild.log 2>&1 || { tail -30 /tmp/rebuild.log; exit 1; }; ts "built $1"; }
bench() { ts "bench $1"; python3 scripts/bench_mla_attention.py --batches 1,16 --ks 0,1,2,3 --reps 20 --out /tmp/e > /tmp/e.txt 2>&1; grep -E "copy|^\| [0-9]" /tmp/e.txt | tee -a $out/exp.txt; cp /tmp/e/mla_attention.json $out/mla_attention_$1_$2.json 2>/dev/null; }
ts "built v7 (tree)"
python3 .tl/dump_attn.py /tmp/dv7.pt
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_attention.py 2>&1 | tail -2 | tee -a $out/exp.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k attention 2>&1 | tail -2 | tee -a $out/exp.txt
bench v7 1
use base; python3 .tl/dump_attn.py /tmp/dbase.pt; bench base 1
python3 .tl/cmp_attn.py /tmp/dv7.pt /tmp/dbase.pt | tee -a $out/exp.txt
use v7; bench v7 2
use base; bench base 2
ts done
