#!/usr/bin/env bash
# Rebuilds this session's kernel versions under .ab/<name>/ (the layout scripts/gpu_ab.sh reads) from the
# patches. Against the tree's kernel: rope3 = a tile in three parts, the rope slab reloaded by the warpgroup whose S
# read it as soon as that S is done; stream = no tensor work (S reads as zeros, no P V), everything else (copies,
# waits, releases, softmax, hand-overs, the combine) as in the tree. Against stream, all diagnostics, not
# attention: stream_noq = Q not read (its tile zero-filled); stream_nocombine = the splits not combined, nothing
# written; stream_bare = both; empty = every block leaves at once (the launch alone). nocluster = the tree with
# the splits combined by the combine kernel, never in a cluster; empty_nocluster = empty launched that way.
# splits6, splits4 = the tree with B = 16 at context 8192 split 6 or 4 ways (mla_attention.cu), where the
# planner picks 8: clusters of 6 or 4 fit the H200 16 at a time, clusters of 8 do not.
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=docs/gpu/attention_1130_thirtyseventh/patches
k=cpp/kernels/cuda/mla_attention_wgmma.cu
variant() {  # variant <name> <base file>
  mkdir -p ".ab/$1/$(dirname $k)" && cp "$2" ".ab/$1/$k" && patch -s ".ab/$1/$k" "$here/$1.patch"
}
variant rope3 "$k"
variant stream "$k"
for v in stream_noq stream_nocombine stream_bare empty; do variant "$v" ".ab/stream/$k"; done
variant nocluster "$k"
variant empty_nocluster ".ab/empty/$k"
for v in splits6 splits4; do
  mkdir -p ".ab/$v/cpp/kernels/cuda" && cp cpp/kernels/cuda/mla_attention.cu ".ab/$v/cpp/kernels/cuda/" \
    && patch -s ".ab/$v/cpp/kernels/cuda/mla_attention.cu" "$here/$v.patch"
done
