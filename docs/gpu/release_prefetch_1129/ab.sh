# v9: a pair's tile a released once its P V is done (before b's); v10: the tensor map prefetched at the kernel's
# start; base9: 488c5e4. The tree as sent holds v10. Output: ab.txt.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/async_copy.cuh"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v10 (tree)"
dump v10; attention_tests; bench v10 1
use v9; dump v9; attention_tests; bench v9 1
use base9; dump base9; bench base9 1
compare v10 base9; compare v9 base9
use v10; bench v10 2
use v9; bench v9 2
use base9; bench base9 2
ts done
