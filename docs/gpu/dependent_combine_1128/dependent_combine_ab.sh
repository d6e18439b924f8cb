# Sixth call (the fifth was the GPU suite): v7 (the tree: dependent_combine.diff on 95ad0e9) against base (95ad0e9).
# Output: exp.txt.
FILES="cpp/kernels/cuda/mla_attention.cu cpp/kernels/cuda/mla_attention_wgmma.cu" BATCHES=1,16
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v7 (tree)"
dump v7; attention_tests
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k attention 2>&1 | tail -2 | tee -a $out/exp.txt
bench v7 1
use base; dump base; bench base 1
compare v7 base
use v7; bench v7 2
use base; bench base 2
ts done
