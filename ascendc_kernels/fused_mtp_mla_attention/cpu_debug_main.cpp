// CANN CPU-debug driver (RUN_MODE=cpu): one MTP verify step (k = 3, 128 heads, context 1000) run
// through tikicpulib's ICPU_RUN_KF, the official host model of the AIC/AIV cores, then compared
// with a plain fp32 reference on the host. Written for CANN 8.1.RC1; NOT run here (no CANN).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "tikicpulib.h"
#include "mla_host_tiling.h"

extern "C" __global__ __aicore__ void fused_mtp_mla_attention_fp16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR,
                                                                  GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void mla_split_combine_fp16(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);

namespace {

constexpr int kHeads = 128, kLora = 512, kRope = 64, kDim = kLora + kRope, kBlock = 128, kK = 3, kContext = 1000;

template <typename T>
T* gm_copy(const std::vector<T>& host) {
  auto* p = static_cast<T*>(AscendC::GmAlloc(host.size() * sizeof(T)));
  std::memcpy(p, host.data(), host.size() * sizeof(T));
  return p;
}

}  // namespace

int main() {
  const int rows = kK + 1, blocks = (kContext + kBlock - 1) / kBlock;
  std::mt19937 gen(0);
  std::normal_distribution<float> normal;
  std::vector<float> qf(rows * kHeads * kDim), cf(blocks * kBlock * kDim);
  for (auto& v : qf) v = normal(gen);
  for (auto& v : cf) v = normal(gen);
  std::vector<half> q(qf.begin(), qf.end()), cache(cf.begin(), cf.end());
  std::vector<int32_t> table(blocks), queryStart{0, rows}, contextLens{kContext};
  for (int b = 0; b < blocks; ++b) table[b] = blocks - 1 - b;  // reversed: every tile gathers

  mla::MlaPlan plan;
  const mla::MlaShape shape{kHeads, kLora, kRope, kBlock, static_cast<uint32_t>(blocks), 1.0f / std::sqrt(float(kDim))};
  const std::string err = mla::plan_mla_attention(shape, queryStart.data(), contextLens.data(), 1, mla::ChipSpec{},
                                                  mla::MlaTileConfig{}, true, plan);
  if (!err.empty()) {
    std::printf("tiling: %s\n", err.c_str());
    return 1;
  }
  std::vector<uint8_t> tilingBytes(sizeof(plan.tiling));
  std::memcpy(tilingBytes.data(), &plan.tiling, sizeof(plan.tiling));
  auto* qGm = gm_copy(q);
  auto* cacheGm = gm_copy(cache);
  auto* tableGm = gm_copy(table);
  auto* listGm = gm_copy(plan.tasks);
  auto* tilingGm = gm_copy(tilingBytes);
  auto* outGm = static_cast<half*>(AscendC::GmAlloc(rows * kHeads * kLora * sizeof(half)));
  auto* workspace = static_cast<uint8_t*>(AscendC::GmAlloc(plan.workspaceBytes));

  AscendC::SetKernelMode(KernelMode::MIX_MODE);
  ICPU_RUN_KF(fused_mtp_mla_attention_fp16, plan.tiling.numCores, (GM_ADDR)qGm, (GM_ADDR)cacheGm, (GM_ADDR)tableGm,
              (GM_ADDR)listGm, (GM_ADDR)outGm, workspace, tilingGm);
  if (plan.needsCombine) {
    AscendC::SetKernelMode(KernelMode::AIV_MODE);
    ICPU_RUN_KF(mla_split_combine_fp16, 2 * mla::ChipSpec{}.aiCores, (GM_ADDR)listGm, (GM_ADDR)outGm, workspace,
                tilingGm);
  }

  // fp32 reference of row i, head h: softmax over positions < context - k + i.
  double worst = 0.0;
  for (int i = 0; i < rows; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      const int visible = kContext - kK + i;
      std::vector<double> w(visible);
      double top = -1e300, sum = 0.0;
      for (int p = 0; p < visible; ++p) {
        const int row = table[p / kBlock] * kBlock + p % kBlock;
        double s = 0.0;
        for (int d = 0; d < kDim; ++d) s += float(q[(i * kHeads + h) * kDim + d]) * float(cache[row * kDim + d]);
        w[p] = s * shape.scale;
        top = std::max(top, w[p]);
      }
      for (auto& x : w) sum += (x = std::exp(x - top));
      for (int d = 0; d < kLora; d += 37) {
        double o = 0.0;
        for (int p = 0; p < visible; ++p) o += w[p] * float(cache[(table[p / kBlock] * kBlock + p % kBlock) * kDim + d]);
        worst = std::max(worst, std::fabs(o / sum - float(outGm[(i * kHeads + h) * kLora + d])));
      }
    }
  }
  std::printf("max abs error vs fp32 reference: %g (%s)\n", worst, worst < 3e-3 ? "pass" : "FAIL");
  for (void* p : {(void*)qGm, (void*)cacheGm, (void*)tableGm, (void*)listGm, (void*)tilingGm, (void*)outGm,
                  (void*)workspace}) {
    AscendC::GmFree(p);
  }
  return worst < 3e-3 ? 0 : 1;
}
