# First call: v8e (the tree: S issued behind the pair before's P V) against base8 (488c5e4). Output: behind_ab.txt.
# Restated after the run over ab_lib.sh's `ab`, which runs the same commands.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu cpp/kernels/cuda/async_copy.cuh cpp/kernels/cuda/wgmma.cuh"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ab v8e base8 2
