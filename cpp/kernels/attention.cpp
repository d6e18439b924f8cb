#include "kernels/attention.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "kernels/cpu/mla_attention_cpu.h"

namespace mtpserve::kernels {

void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping) {
  cache.view({-1, cache.size(2)}).index_copy_(0, slot_mapping, rows.to(cache.scalar_type()));
}

at::Tensor gather_latent(const at::Tensor& cache, const AttentionMetadata& meta, int64_t seq, int64_t len) {
  const int64_t block_size = meta.block_size(cache);
  auto positions = at::arange(len, meta.block_tables.options().dtype(at::kLong));
  auto blocks = meta.block_tables[seq].to(at::kLong).index_select(0, at::floor_divide(positions, block_size));
  auto slots = blocks * block_size + at::remainder(positions, block_size);
  return cache.view({-1, cache.size(2)}).index_select(0, slots);
}

at::Tensor mla_absorbed_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                  const std::vector<int64_t>& seqs, int64_t kv_lora_rank, double scale) {
  if (cache.is_cpu()) return cpu::mla_absorbed_attention(q, cache, meta, seqs, kv_lora_rank, scale);
  throw std::runtime_error("mla_absorbed_attention: no kernel for device " + cache.device().str());
}

}  // namespace mtpserve::kernels
