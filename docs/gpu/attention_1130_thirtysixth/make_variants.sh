#!/usr/bin/env bash
# Rebuilds this session's kernel versions under .ab/<name>/ (the layout variants.sh reads) from the patches:
# old = 91ee484's kernel files; pre_early = the tree of calls 1-3 (warpgroup 1's P_a V_a after its exponentials);
# slabs = pre_early with a barrier per slab; early_slabs, early_ahead = the tree with a barrier per slab, and with
# the block table read a pair ahead.
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=docs/gpu/attention_1130_thirtysixth/patches
k=cpp/kernels/cuda/mla_attention_wgmma.cu
mkdir -p .ab/old/cpp/kernels/cuda
for f in mla_attention_wgmma.cu mla_attention_tile.cuh wgmma.cuh async_copy.cuh; do
  git show "91ee484:cpp/kernels/cuda/$f" > ".ab/old/cpp/kernels/cuda/$f"
done
variant() {  # variant <name> <base file> <patch>
  mkdir -p ".ab/$1/cpp/kernels/cuda" && cp "$2" ".ab/$1/$k" && patch -s ".ab/$1/$k" "$here/$3"
}
variant pre_early "$k" pre_early.patch
variant slabs ".ab/pre_early/$k" slabs.patch
variant early_slabs "$k" early_slabs.patch
variant early_ahead "$k" early_ahead.patch
