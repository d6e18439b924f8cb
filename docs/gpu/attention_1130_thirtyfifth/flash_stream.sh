#!/usr/bin/env bash
# One H200: our fused call (A) and its load pipeline alone (the stream variant; make_variants.sh first), each beside
# FlashMLA's dense decode on the same calls, A B A B. FlashMLA's source as .ab/flashmla_src.tgz (see
# docs/gpu/flashmla_1130_thirtyfourth/call.sh). One device call (carry .whl):
#   bash docs/gpu/attention_1130_thirtyfifth/flash_stream.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-/tmp/fs}
source docs/gpu/attention_1130_thirtyfifth/build_two.sh stream
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
