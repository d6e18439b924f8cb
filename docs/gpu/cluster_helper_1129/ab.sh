# h1 (the tree): the cluster combine's protocol in one helper (combine_in_cluster) instead of twice; base11: b326d80.
# A pure refactor whose SASS differs in instruction choice (same count): outputs bit for bit, the cluster tests, and
# the time at B = 16 and 64 (B = 64 runs the cluster path). Output: ab.txt.
# Restated after the run over ab_lib.sh's `ab`, which runs the same commands.
# The call reached the session's device-time limit during the second base run: ab.txt has h1 twice, base11 once.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu"
BATCHES=16,64
source docs/gpu/early_copy_1128/ab_lib.sh
ab h1 base11 2
