# First call: v8e (the tree: S issued behind the pair before's P V) against base8 (488c5e4). Output: behind_ab.txt.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/async_copy.cuh cpp/kernels/cuda/wgmma.cuh"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v8e (tree)"
dump v8e; attention_tests
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k "attention" 2>&1 | tail -2 | tee -a $out/exp.txt
bench v8e 1
use base8; dump base8; bench base8 1
compare v8e base8
use v8e; bench v8e 2
use base8; bench base8 2
ts done
