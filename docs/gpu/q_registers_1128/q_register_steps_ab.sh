# The A/B of 0623e11 on a lent H200 (device tool, carry .whl and .ab): the tree with kQRegisterSteps = 16, then 8,
# then the base (the two files of e15fbc9, mla_attention_wgmma.cu and wgmma.cuh, under .ab/base), then 16 and base again.
# Outputs of the 14 cases of dump_attn.py compared bit for bit (cmp_attn.py). Output: q_register_steps_ab.txt.
set -uo pipefail
out=${OUT:-/tmp/x}
STAGES=none bash scripts/gpu_check.sh > /tmp/build.log 2>&1 || { tail -30 /tmp/build.log; exit 1; }
cat $out/environment.txt
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
f=cpp/kernels/cuda/mla_attention_wgmma.cu w=cpp/kernels/cuda/wgmma.cuh
cp $f /tmp/qreg.cu; cp $w /tmp/qreg_wgmma.cuh
use() {
  if [ $1 = base ]; then cp .ab/base/$f $f; cp .ab/base/$w $w
  else cp /tmp/qreg.cu $f; cp /tmp/qreg_wgmma.cuh $w; sed -i "s/kQRegisterSteps = 16;/kQRegisterSteps = $1;/" $f; fi
  python3 -m pip install --no-build-isolation --no-deps -e . > /tmp/rebuild.log 2>&1 || { tail -30 /tmp/rebuild.log; exit 1; }
}
bench() { echo "== $1" | tee -a $out/exp.txt; python3 scripts/bench_mla_attention.py --batches 16,64,128 --ks 0,3 --reps 20 --out /tmp/e > /tmp/e.txt 2>&1; grep -E "^\| [0-9]" /tmp/e.txt | tee -a $out/exp.txt; }
python3 docs/gpu/q_registers_1128/dump_attn.py /tmp/d16.pt
timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_attention.py 2>&1 | tail -2
bench 16
use 8; python3 docs/gpu/q_registers_1128/dump_attn.py /tmp/d8.pt; bench 8
use base; python3 docs/gpu/q_registers_1128/dump_attn.py /tmp/dbase.pt; bench base
python3 docs/gpu/q_registers_1128/cmp_attn.py /tmp/d16.pt /tmp/dbase.pt; python3 docs/gpu/q_registers_1128/cmp_attn.py /tmp/d8.pt /tmp/dbase.pt
use 16; bench 16
use base; bench base
