#!/usr/bin/env bash
# One H200: our fused call (A) and its load pipeline alone (the stream variant; make_variants.sh first), each beside
# FlashMLA's dense decode on the same calls, A B A B. FlashMLA's source as .ab/flashmla_src.tgz (see
# docs/gpu/flashmla_1130_thirtyfourth/call.sh). One device call (carry .whl):
#   bash docs/gpu/attention_1130_thirtyfifth/flash_stream.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/fs}
STAGES=none bash scripts/gpu_check.sh > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
export PYTHONPATH=/tmp/site PATH=/usr/local/cuda/bin:$PATH CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) MAX_JOBS=$(nproc)
so=$(python3 -c 'import mtpserve._C as c; print(c.__file__)')
cp "$so" /tmp/A.so
f=cpp/kernels/cuda/mla_attention_wgmma.cu
cp $f /tmp/A.cu; cp .ab/stream/$f $f
python3 -m pip install --no-build-isolation --no-deps -e . > "$out/rebuild.log" 2>&1 || { tail -30 "$out/rebuild.log"; exit 1; }
cp "$so" /tmp/stream.so; cp /tmp/A.cu $f; touch $f
mkdir -p /tmp/flashmla && tar xzf .ab/flashmla_src.tgz -C /tmp/flashmla
(cd scripts && python3 -c "import flashmla_reference as f; f.load('/tmp/flashmla')") > "$out/flashmla_build.log" 2>&1 \
  || { tail -30 "$out/flashmla_build.log"; exit 1; }
for v in A stream A stream; do
  cp /tmp/$v.so "$so"
  echo "== $v"
  timeout 150 python3 scripts/bench_mla_attention.py --flashmla /tmp/flashmla --reps 30 --batches 16,64,128 --ks 0,3 \
    --out /tmp/fs_$v > /tmp/fs_run.txt 2>&1
  grep -E "^\| 8192|copy bandwidth" /tmp/fs_run.txt
done | tee "$out/flash_stream.txt"
cp /tmp/A.so "$so"
