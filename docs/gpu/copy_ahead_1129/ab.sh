# v11 (the tree): warpgroup 0 copies its tile of the pair after next into a's buffer as soon as every warp has
# released it, while b's P V still runs; base10: b326d80. Output: ab.txt.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v11 (tree)"
dump v11; attention_tests
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k "attention" 2>&1 | tail -2 | tee -a $out/exp.txt
bench v11 1
use base10; dump base10; bench base10 1
compare v11 base10
use v11; bench v11 2
use base10; bench base10 2
use v11; bench v11 3
use base10; bench base10 3
ts done
