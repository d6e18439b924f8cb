#!/usr/bin/env bash
# Makes the variants of this session's calls from their patches, each as .ab/<variant>/ (the two kernel files with
# their paths in the tree), where docs/gpu/flashmla_1130_thirtyfourth/ab.sh, profile.sh and flash_stream.sh take them:
#   stream           loads, waits and releases only (no S, softmax or P V): the load pipeline's own rate
#   compute          only the first four tiles are copied, later tiles reuse whatever the buffers hold: the math alone
#   prefetch         each bulk load of tile t also prefetches tile t + 2 into L2
#   early_a          S of this warpgroup's next tile issued after a's release, behind P_b V_b
#   early_b          the same, after both releases
#   early_a_compute  early_a's order with compute's copies
# Then e.g.  VARIANTS="A stream compute" bash docs/gpu/flashmla_1130_thirtyfourth/ab.sh  (device tool, carry .whl)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
for v in stream compute prefetch early_a early_b early_a_compute; do
  rm -rf ".ab/$v" && mkdir -p ".ab/$v/cpp/kernels/cuda"
  cp cpp/kernels/cuda/async_copy.cuh cpp/kernels/cuda/mla_attention_wgmma.cu ".ab/$v/cpp/kernels/cuda/"
  patch -s -d ".ab/$v" -p1 < "$here/$v.patch"
done
