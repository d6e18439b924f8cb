# Second call: v5 (the tree: 15d15e8's early copy) against base (940efc5). Output: early_copy_ab.txt.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/async_copy.cuh" BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v5 (tree)"
dump v5; attention_tests
bench v5 1
use base; dump base; bench base 1
compare v5 base
use v5; bench v5 2
use base; bench base 2
ts done
