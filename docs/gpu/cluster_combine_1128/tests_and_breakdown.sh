# Third call: v6 (the tree: 95ad0e9's cluster combine) tests, memcheck and the breakdown; base is 15d15e8. As run,
# `bench base 1` stopped the call (its bench took no third argument under `set -u`); cluster_ab.sh redid the A/B.
# Output: tests_and_breakdown.txt, breakdown_cluster.txt.
FILES="cpp/kernels/cuda/mla_attention_tile.cuh cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/mla_attention_wgmma.cuh cpp/kernels/cuda/split_combine.cuh"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ts "built v6 (tree)"
dump v6
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_cuda_attention.py 2>&1 | tail -3 | tee -a $out/exp.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_batch_invariance.py -k attention 2>&1 | tail -3 | tee -a $out/exp.txt
timeout 120 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -q -p no:cacheprovider -m cuda \
  tests/test_cuda_attention.py -k "graph or (split and h16)" 2>&1 | tail -4 | tee -a $out/exp.txt
bench v6 1 --breakdown
ts done
