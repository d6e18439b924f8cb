#pragma once
// The Hopper (sm_90a) kernel of absorbed MLA at DeepSeek-V3's latent shape (512 + 64): the same work
// split and results contract as mla_attention.cuh's tensor-core kernel, with wgmma reading Q and the KV
// tiles from shared memory once per warpgroup instead of once per warp, and two warpgroups taking the tiles in
// pairs so that one's softmax runs while the other's products do.
#include "kernels/cuda/mla_attention.cuh"

namespace mtpserve::kernels::cuda {

// Whether the launch's shape and dtype are the kernel's (bf16/fp16, kv_lora 512, dim 576).
bool wgmma_attention_shape(const MlaAttentionLaunch& p);

// The attention pass. With 2 to 8 KV splits and a grid whose clusters of a tile's splits the GPU holds at once,
// each cluster's blocks combine their splits through their shared memory and `combined` is set; otherwise, with
// p.splits > 1, they leave partials and lse for the caller's combine.
cudaError_t launch_mla_attention_wgmma(const MlaAttentionLaunch& p, cudaStream_t stream, bool& combined);

}  // namespace mtpserve::kernels::cuda
