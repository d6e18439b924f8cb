// Host side of our Ascend C fused MTP MLA attention: plans the step's work list with the kernel's
// host tiling (ascendc_kernels/fused_mtp_mla_attention/mla_host_tiling.h), moves the tiling and the
// list to the device and launches the kernel, then the split-KV combine when the plan split a KV
// range, on torch_npu's current stream. Built only where CANN is found (CMakeLists.txt): it links
// the kernels' libmtp_mla_kernels.so and torch_npu. In CI it is compiled, not linked, against the
// headers of the torch_npu wheel (tests/test_npu_sources.py).
#include <ATen/ATen.h>
#include <acl/acl.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/npu/ascendc_attention.h"
#include "mla_host_tiling.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

// The launch stubs ascendc_library() generates for the kernels (aclrtlaunch_<kernel>.h):
// blockDim AI cores (a mixed kernel: one AIC and two AIVs each; an AIV-only kernel: AIV cores).
extern "C" {
uint32_t aclrtlaunch_fused_mtp_mla_attention_bf16(uint32_t, aclrtStream, void*, void*, void*, void*, void*, void*,
                                                  void*);
uint32_t aclrtlaunch_fused_mtp_mla_attention_fp16(uint32_t, aclrtStream, void*, void*, void*, void*, void*, void*,
                                                  void*);
uint32_t aclrtlaunch_mla_split_combine_bf16(uint32_t, aclrtStream, void*, void*, void*, void*);
uint32_t aclrtlaunch_mla_split_combine_fp16(uint32_t, aclrtStream, void*, void*, void*, void*);
}

namespace mtpserve::kernels::npu {

namespace {

void check_launch(uint32_t status, const char* kernel) {
  if (status != 0) throw std::runtime_error(std::string(kernel) + ": launch failed (ACL error " +
                                            std::to_string(status) + ")");
}

// The work list is planned from the step's query starts and context lengths, read on the host.
mla::MlaPlan plan_step(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                       int64_t kv_lora_rank, double scale) {
  auto starts = meta.host_query_start.contiguous(), contexts = meta.host_context_lens.contiguous();
  const mla::MlaShape shape{static_cast<uint32_t>(q.size(1)), static_cast<uint32_t>(kv_lora_rank),
                            static_cast<uint32_t>(q.size(2) - kv_lora_rank), static_cast<uint32_t>(cache.size(1)),
                            static_cast<uint32_t>(meta.block_tables.size(1)), static_cast<float>(scale)};
  mla::MlaPlan plan;
  const std::string err = mla::plan_mla_attention(shape, starts.data_ptr<int32_t>(), contexts.data_ptr<int32_t>(),
                                                  static_cast<uint32_t>(meta.num_seqs), mla::ChipSpec{},
                                                  mla::MlaTileConfig{}, /*checkCapacity=*/true, plan);
  if (!err.empty()) throw std::invalid_argument("ascendc mla_attention: " + err);
  return plan;
}

at::Tensor launch(const at::Tensor& q_in, const at::Tensor& cache, const AttentionMetadata& meta, int64_t kv_lora_rank,
                  double scale) {
  if (q_in.scalar_type() != at::kBFloat16 && q_in.scalar_type() != at::kHalf) {
    throw std::invalid_argument("ascendc mla_attention: q must be bf16 or fp16");
  }
  auto out = at::empty({q_in.size(0), q_in.size(1), kv_lora_rank}, q_in.options());
  const mla::MlaPlan plan = plan_step(q_in, cache, meta, kv_lora_rank, scale);
  if (plan.tiling.numTasks == 0) return out;
  auto q = q_in.contiguous(), tables = meta.block_tables.contiguous();
  auto bytes = at::TensorOptions().dtype(at::kByte);
  auto tiling = at::empty({static_cast<int64_t>(sizeof(mla::MlaTiling))}, bytes);
  std::memcpy(tiling.data_ptr(), &plan.tiling, sizeof(mla::MlaTiling));
  auto tasks = at::tensor(at::ArrayRef<int32_t>(plan.tasks), at::kInt);
  tiling = tiling.to(q.device());
  tasks = tasks.to(q.device());
  auto workspace = at::empty({static_cast<int64_t>(plan.workspaceBytes)}, bytes.device(q.device()));
  aclrtStream stream = c10_npu::getCurrentNPUStream(q.device().index()).stream();
  const bool bf16 = q.scalar_type() == at::kBFloat16;
  check_launch((bf16 ? aclrtlaunch_fused_mtp_mla_attention_bf16 : aclrtlaunch_fused_mtp_mla_attention_fp16)(
                   plan.tiling.numCores, stream, q.data_ptr(), cache.data_ptr(), tables.data_ptr(), tasks.data_ptr(),
                   out.data_ptr(), workspace.data_ptr(), tiling.data_ptr()),
               "fused_mtp_mla_attention");
  if (plan.needsCombine) {
    check_launch((bf16 ? aclrtlaunch_mla_split_combine_bf16 : aclrtlaunch_mla_split_combine_fp16)(
                     2 * mla::ChipSpec{}.aiCores, stream, tasks.data_ptr(), out.data_ptr(), workspace.data_ptr(),
                     tiling.data_ptr()),
                 "mla_split_combine");
  }
  return out;
}

}  // namespace

extern const MlaAttentionFn ascendc_mla_attention = launch;

}  // namespace mtpserve::kernels::npu
