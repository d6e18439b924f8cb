# Fourth call: v6 (the tree: 95ad0e9's cluster combine) against base (15d15e8). Output: cluster_ab.txt.
FILES="cpp/kernels/cuda/mla_attention_tile.cuh cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/mla_attention_wgmma.cuh cpp/kernels/cuda/split_combine.cuh"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v6 (tree)"
dump v6
bench v6 1
use base; dump base; bench base 1
compare v6 base
use v6; bench v6 2
use base; bench base 2
ts done
