# First call: v2 (the tree: early copies with a four-tile prologue), v1 (early copies, blocking), v4 (v2 with the
# in-kernel combine up to 8 splits), base (940efc5). Output: first_try_ab.txt.
FILES=cpp/kernels/cuda/mla_attention_wgmma.cu BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v2 (tree)"
dump v2; attention_tests
bench v2 1
use v1; dump v1; bench v1 1
use base; dump base; bench base 1
compare v2 base; compare v1 base
use v4; bench v4 1
use v2; bench v2 2
use base; bench base 2
ts done
