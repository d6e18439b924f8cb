// Fused MTP MLA attention for Atlas A2 (Ascend910B), a mixed cube/vector kernel (1 AIC : 2 AIV).
// Absorbed MLA over the paged latent cache [blocks, block_size, D = lora + rope]: every task of the
// host's work list is (sequence, query rows x heads <= rowsPerTile, KV range); its q rows meet each
// KV tile once, so the k + 1 rows of an MTP verify step (and all heads) share one read of the KV.
// Row i of a sequence with n query rows and context c sees positions <= c - n + i.
//   AIC (mla_cube_stage.h): KV tiles GM -> L1 (double-buffered), S = q.K^T and O = P.V on the cube.
//   AIV (mla_vector_stage.h): online softmax in fp32, output or split-KV partials.
// Compiles unchanged with CANN's ccec (NPU), CANN's CPU-debug library (ICPU_RUN_KF) and g++ with
// ascendc_kernels/cpu_shim.
#include "kernel_operator.h"
#include "mla_cube_stage.h"
#include "mla_vector_stage.h"

namespace mla {

template <typename T>
MLA_AICORE inline void RunAttention(GM_ADDR q, GM_ADDR cache, GM_ADDR blockTables, GM_ADDR workList, GM_ADDR out,
                                    GM_ADDR workspace, GM_ADDR tiling) {
  MlaTiling t;
  LoadTiling(t, tiling);
  AscendC::GlobalTensor<int32_t> list;
  list.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(workList));
  if ASCEND_IS_AIC {
    const uint32_t core = AscendC::GetBlockIdx();
    CubeStage<T> cube;
    cube.Init(t, q, cache, blockTables, workspace, core);
    for (uint32_t i = core; i < t.numTasks; i += t.numCores) cube.Run(LoadTask(list, i));
  }
  if ASCEND_IS_AIV {
    const uint32_t core = AscendC::GetBlockIdx() / 2;  // the AIC this AIV pairs with
    VectorStage<T> vec;
    vec.Init(t, out, workspace, core, AscendC::GetSubBlockIdx());
    for (uint32_t i = core; i < t.numTasks; i += t.numCores) vec.Run(LoadTask(list, i));
  }
}

}  // namespace mla

extern "C" __global__ __aicore__ void fused_mtp_mla_attention_bf16(GM_ADDR q, GM_ADDR cache, GM_ADDR blockTables,
                                                                  GM_ADDR workList, GM_ADDR out, GM_ADDR workspace,
                                                                  GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  mla::RunAttention<bfloat16_t>(q, cache, blockTables, workList, out, workspace, tiling);
}

extern "C" __global__ __aicore__ void fused_mtp_mla_attention_fp16(GM_ADDR q, GM_ADDR cache, GM_ADDR blockTables,
                                                                  GM_ADDR workList, GM_ADDR out, GM_ADDR workspace,
                                                                  GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  mla::RunAttention<half>(q, cache, blockTables, workList, out, workspace, tiling);
}
