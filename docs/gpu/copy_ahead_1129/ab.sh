# v11 (the tree): warpgroup 0 copies its tile of the pair after next into a's buffer as soon as every warp has
# released it, while b's P V still runs; base10: b326d80. Output: ab.txt.
# Restated after the run over ab_lib.sh's `ab`, which runs the same commands.
FILES="cpp/kernels/cuda/mla_attention_wgmma.cu"
BATCHES=16,64,128
source docs/gpu/early_copy_1128/ab_lib.sh
ab v11 base10 3
