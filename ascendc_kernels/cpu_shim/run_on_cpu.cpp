// C ABI for tests: plans the step on the "host" exactly as the NPU host path will, then launches
// the unchanged Ascend C kernels through the CPU shim (blockDim AI cores = AIC + 2 AIV threads
// each), and the split-KV combine when the plan split any KV range.
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "kernel_operator.h"
#include "mla_host_tiling.h"

extern "C" {
void fused_mtp_mla_attention_bf16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
void fused_mtp_mla_attention_fp16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
void mla_split_combine_bf16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
void mla_split_combine_fp16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
}

namespace {

enum Status { kOk = 0, kBadArgument = 1, kTilingRejected = 2, kKernelFailed = 3 };

int fail(char* msg, int len, int code, const std::string& what) {
  if (msg && len > 0) std::snprintf(msg, static_cast<size_t>(len), "%s", what.c_str());
  return code;
}

GM_ADDR gm(const void* p) { return static_cast<GM_ADDR>(const_cast<void*>(p)); }

}  // namespace

// dtype: 0 = bf16, 1 = fp16. q [tokens, heads, lora + rope], cache [blocks, block_size, lora + rope],
// out [tokens, heads, lora]. rows_per_tile / kv_tile / ai_cores: 0 = the defaults (64, 128, 24).
// check_capacity = 0 skips the host's capacity check so that the shim's own check can be tested.
// Returns 0, or 1 bad argument, 2 tiling rejected, 3 the kernel broke a rule of the chip (message).
extern "C" int mtp_mla_attention_cpu(const void* q, const void* cache, const int32_t* block_tables,
                                     const int32_t* query_start, const int32_t* context_lens, void* out, int dtype,
                                     int num_seqs, int table_width, int num_heads, int kv_lora_rank, int rope_dim,
                                     int block_size, float scale, int rows_per_tile, int kv_tile, int ai_cores,
                                     int check_capacity, int* num_tasks_out, char* msg, int msg_len) {
  if (dtype != 0 && dtype != 1) return fail(msg, msg_len, kBadArgument, "dtype must be 0 (bf16) or 1 (fp16)");
  if (num_seqs <= 0 || num_heads <= 0) return fail(msg, msg_len, kBadArgument, "empty step");
  mla::ChipSpec chip;
  if (ai_cores > 0) chip.aiCores = static_cast<uint32_t>(ai_cores);
  mla::MlaTileConfig cfg;
  if (rows_per_tile > 0) cfg.rowsPerTile = static_cast<uint32_t>(rows_per_tile);
  if (kv_tile > 0) cfg.kvTile = static_cast<uint32_t>(kv_tile);
  const mla::MlaShape shape{static_cast<uint32_t>(num_heads), static_cast<uint32_t>(kv_lora_rank),
                            static_cast<uint32_t>(rope_dim), static_cast<uint32_t>(block_size),
                            static_cast<uint32_t>(table_width), scale};
  mla::MlaPlan plan;
  const std::string err = plan_mla_attention(shape, query_start, context_lens, static_cast<uint32_t>(num_seqs), chip,
                                             cfg, check_capacity != 0, plan);
  if (!err.empty()) return fail(msg, msg_len, err.rfind("tiling rejected", 0) == 0 ? kTilingRejected : kBadArgument, err);
  if (num_tasks_out) *num_tasks_out = static_cast<int>(plan.tiling.numTasks);
  if (plan.tiling.numTasks == 0) return kOk;
  std::vector<uint8_t> workspace(plan.workspaceBytes, 0xFF);  // NaN bytes: unwritten reads show
  mla::MlaTiling tiling = plan.tiling;
  GM_ADDR ws = workspace.data(), tl = reinterpret_cast<GM_ADDR>(&tiling), list = gm(plan.tasks.data());
  try {
    AscendC::LaunchMixAic1To2(tiling.numCores, [&] {
      (dtype == 0 ? fused_mtp_mla_attention_bf16 : fused_mtp_mla_attention_fp16)(
          gm(q), gm(cache), gm(block_tables), list, gm(out), ws, tl);
    });
    if (plan.needsCombine) {
      const uint32_t vectorCores = 2 * chip.aiCores;
      AscendC::LaunchAivOnly(vectorCores, [&] {
        (dtype == 0 ? mla_split_combine_bf16 : mla_split_combine_fp16)(list, gm(out), ws, tl);
      });
    }
  } catch (const std::exception& e) {
    return fail(msg, msg_len, kKernelFailed, e.what());
  }
  return kOk;
}
