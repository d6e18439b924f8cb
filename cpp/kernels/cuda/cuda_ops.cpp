#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/moe_cuda.h"
#include "kernels/cuda/norm_rope_cuda.h"
#include "kernels/cuda/piecewise_graph_cuda.h"
#include "kernels/cuda/sampling_cuda.h"
#include "kernels/cuda/step_graph_cuda.h"
#include "kernels/cuda/device_timer_cuda.h"
#include "kernels/kernel_ops.h"
#include "kernels/row_buckets.h"
#include "kernels/sampling_probs.h"

namespace mtpserve::kernels::cuda {

const KernelOps& ops() {
  static const KernelOps table{
      .write_latent_cache = write_latent_cache,
      .mla_attention = mla_attention,
      .rms_norm = rms_norm,
      .add_rms_norm = add_rms_norm,
      .rotary = rotary,
      .silu_and_mul = silu_and_mul,
      .route_noaux_tc = route_noaux_tc,
      .moe_experts = moe_experts,
      .sampling_probs = sampling_probs,
      .sample_and_verify = sample_and_verify,
      .write_latent_kv = write_latent_kv,
      .capture_graph = capture_graph,
      .capture_piecewise = capture_piecewise,
      .eager_rows = round_up_rows,
      .make_device_timer = make_device_timer,
  };
  return table;
}

}  // namespace mtpserve::kernels::cuda
