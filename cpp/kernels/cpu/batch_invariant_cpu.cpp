// Batch-invariant CPU kernels: see batch_invariant_cpu.h for the contract and how each op keeps it.
// Built with -ffp-contract=off (CMakeLists.txt), so that no a * b + c here becomes an FMA in one
// copy of a loop (vectorised body) and not in another (scalar tail).
#include "kernels/cpu/batch_invariant_cpu.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/norm_rope_cpu.h"
#include "kernels/cpu/sampling_cpu.h"
#include "kernels/sampling_probs.h"

namespace mtpserve::kernels::cpu {

namespace batch_invariant {

namespace {

int64_t num_tiles(int64_t rows) { return (rows + kRowTile - 1) / kRowTile; }

// [rows, K] -> [num_tiles * kRowTile, K], zero rows appended (a copy only when padding is needed).
at::Tensor pad_rows(const at::Tensor& flat) {
  const int64_t rows = flat.size(0), padded_rows = num_tiles(rows) * kRowTile;
  if (padded_rows == rows) return flat.contiguous();
  auto padded = at::zeros({padded_rows, flat.size(1)}, flat.options());
  padded.narrow(0, 0, rows).copy_(flat);
  return padded;
}

// padded [tiles * kRowTile, K] times weight [N, K] transposed, one at::linear per tile of rows: the
// GEMM's configuration is then the same for every tile of every step. (One at::bmm over the tiles
// against the expanded weight computes the same bits but copies the weight per tile: 10x slower.)
at::Tensor tiled_linear(const at::Tensor& padded, const at::Tensor& weight) {
  const int64_t tiles = padded.size(0) / kRowTile;
  if (tiles == 1) return at::linear(padded, weight);
  std::vector<at::Tensor> outs;
  outs.reserve(tiles);
  for (int64_t t = 0; t < tiles; ++t) outs.push_back(at::linear(padded.narrow(0, t * kRowTile, kRowTile), weight));
  return at::cat(outs);
}

// Fixed-order dot product: 8 running lanes (the compiler may vectorise them, each lane still adds
// in index order), then the lanes and the tail combined in a fixed order.
inline float dot(const float* a, const float* b, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int l = 0; l < 8; ++l) lane[l] += a[d + l] * b[d + l];
  }
  float tail = 0;
  for (; d < n; ++d) tail += a[d] * b[d];
  return (((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) + tail;
}

template <typename T>
inline T silu_mul(float gate, float up) {
  const T activated = static_cast<T>(gate / (1.0f + std::exp(-gate)));
  return static_cast<T>(static_cast<float>(activated) * up);
}

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight) {
  const int64_t k = x.size(-1), n = weight.size(0);
  auto flat = x.reshape({-1, k});
  const int64_t rows = flat.size(0);
  auto out_shape = x.sizes().vec();
  out_shape.back() = n;
  if (rows == 0) return at::empty(out_shape, x.options());
  return tiled_linear(pad_rows(flat), weight).narrow(0, 0, rows).reshape(out_shape);
}

at::Tensor head_matmul(const at::Tensor& x, const at::Tensor& weight) {
  const int64_t rows = x.size(0), heads = x.size(1), k = x.size(2), n = weight.size(2);
  if (rows == 0) return at::empty({0, heads, n}, x.options());
  const int64_t tiles = num_tiles(rows);
  auto padded = at::zeros({heads, tiles * kRowTile, k}, x.options());
  padded.narrow(1, 0, rows).copy_(x.transpose(0, 1));
  // One bmm over (head, tile) pairs, each a [kRowTile, K] x [K, N] product of its own: the per-head
  // weights are small, so giving every tile its copy costs little.
  auto weights = weight.unsqueeze(1).expand({heads, tiles, k, n}).reshape({heads * tiles, k, n});
  auto out = at::bmm(padded.view({heads * tiles, kRowTile, k}), weights).view({heads, tiles * kRowTile, n});
  return out.narrow(1, 0, rows).transpose(0, 1);
}

at::Tensor mla_attention(const at::Tensor& q_in, const at::Tensor& cache, const AttentionMetadata& meta,
                         int64_t kv_lora_rank, double scale) {
  auto q = q_in.contiguous().to(at::kFloat);
  auto query_start = meta.query_start.to(at::kInt).contiguous(), context_lens = meta.context_lens.to(at::kInt).contiguous();
  auto tables = meta.block_tables.to(at::kInt).contiguous();
  const int32_t* qs = query_start.data_ptr<int32_t>();
  const int32_t* ctx_lens = context_lens.data_ptr<int32_t>();
  const int32_t* table_rows = tables.data_ptr<int32_t>();
  const int64_t table_stride = tables.size(1), block_size = cache.size(1), dim = cache.size(2);
  const int64_t heads = q.size(1), lora = kv_lora_rank;
  const float fscale = static_cast<float>(scale);
  auto flat_cache = cache.view({-1, dim});
  auto out = at::zeros({q.size(0), heads, lora}, at::kFloat);
  const float* qp = q.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    const int64_t q_len = qs[s + 1] - qs[s], ctx = ctx_lens[s];
    if (q_len <= 0 || ctx <= 0) continue;
    // The sequence's latent rows, in position order, in fp32.
    std::vector<int64_t> slots(ctx);
    const int32_t* table = table_rows + s * table_stride;
    for (int64_t pos = 0; pos < ctx; ++pos) slots[pos] = int64_t{table[pos / block_size]} * block_size + pos % block_size;
    auto keys = flat_cache.index_select(0, at::tensor(slots, at::kLong)).to(at::kFloat).contiguous();
    const float* kp = keys.data_ptr<float>();
    at::parallel_for(0, q_len * heads, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> probs(ctx);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t i = item / heads, h = item % heads, row = qs[s] + i;
        const int64_t visible = std::min(ctx, ctx - q_len + i + 1);
        if (visible <= 0) continue;
        const float* qrow = qp + (row * heads + h) * dim;
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t p = 0; p < visible; ++p) {
          probs[p] = dot(qrow, kp + p * dim, dim) * fscale;
          max_score = std::max(max_score, probs[p]);
        }
        float total = 0;
        for (int64_t p = 0; p < visible; ++p) {
          probs[p] = std::exp(probs[p] - max_score);
          total += probs[p];
        }
        float* acc = op + (row * heads + h) * lora;
        for (int64_t p = 0; p < visible; ++p) {
          const float w = probs[p] / total;
          const float* value = kp + p * dim;
          for (int64_t c = 0; c < lora; ++c) acc[c] += w * value[c];
        }
      }
    });
  }
  return out.to(q_in.scalar_type());
}

at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight, double eps) {
  auto x = x_in.contiguous();
  const int64_t dim = x.size(-1), rows = dim == 0 ? 0 : x.numel() / dim;
  auto w = weight.to(at::kFloat).contiguous();
  auto out = at::empty_like(x);
  const float* wp = w.data_ptr<float>();
  const float feps = static_cast<float>(eps);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "bi_rms_norm", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = out.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* xr = xp + r * dim;
        scalar_t* yr = yp + r * dim;
        float squares = 0;
        for (int64_t d = 0; d < dim; ++d) {
          const float v = static_cast<float>(xr[d]);
          squares += v * v;
        }
        const float inv = 1.0f / std::sqrt(squares / static_cast<float>(dim) + feps);
        for (int64_t d = 0; d < dim; ++d) {
          const scalar_t normed = static_cast<scalar_t>(static_cast<float>(xr[d]) * inv);
          yr[d] = static_cast<scalar_t>(wp[d] * static_cast<float>(normed));
        }
      }
    });
  });
  return out;
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps) {
  auto sum = x + delta;  // one rounding per element: the same in any batch
  return {sum, rms_norm(sum, weight, eps)};
}

at::Tensor silu_and_mul(const at::Tensor& gate_up_in) {
  auto gate_up = gate_up_in.contiguous();
  const int64_t width = gate_up.size(-1), inter = width / 2, rows = width == 0 ? 0 : gate_up.numel() / width;
  auto shape = gate_up.sizes().vec();
  shape.back() = inter;
  auto out = at::empty(shape, gate_up.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, gate_up.scalar_type(), "bi_silu_and_mul", [&] {
    const scalar_t* gp = gate_up.data_ptr<scalar_t>();
    scalar_t* yp = out.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t i = 0; i < inter; ++i) {
          yp[r * inter + i] = silu_mul<scalar_t>(static_cast<float>(gp[r * width + i]),
                                                 static_cast<float>(gp[r * width + inter + i]));
        }
      }
    });
  });
  return out;
}

Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p) {
  auto logits = router_logits.to(at::kFloat).contiguous();
  auto bias = correction_bias.to(at::kFloat).contiguous();
  const int64_t tokens = logits.size(0), experts = logits.size(1), group_size = experts / p.n_group;
  auto weights = at::empty({tokens, p.top_k}, at::kFloat);
  auto chosen = at::empty({tokens, p.top_k}, at::kLong);
  const float* lp = logits.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* wp = weights.data_ptr<float>();
  int64_t* cp = chosen.data_ptr<int64_t>();
  const float ninf = -std::numeric_limits<float>::infinity();
  const float scaling = static_cast<float>(p.routed_scaling_factor);
  at::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(experts), choice(experts), group_score(p.n_group);
    std::vector<char> taken;
    // Index of the largest value not yet taken; ties go to the lower index.
    auto best = [&taken](const std::vector<float>& v) {
      int64_t b = -1;
      for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
        if (!taken[i] && (b < 0 || v[i] > v[b])) b = i;
      }
      return b;
    };
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t e = 0; e < experts; ++e) {
        scores[e] = 1.0f / (1.0f + std::exp(-lp[t * experts + e]));
        choice[e] = scores[e] + bp[e];
      }
      for (int64_t g = 0; g < p.n_group; ++g) {
        float first = ninf, second = ninf;
        for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) {
          if (choice[e] > first) {
            second = first;
            first = choice[e];
          } else if (choice[e] > second) {
            second = choice[e];
          }
        }
        group_score[g] = group_size > 1 ? first + second : first;
      }
      taken.assign(p.n_group, 0);
      for (int64_t i = 0; i < p.topk_group; ++i) taken[best(group_score)] = 1;
      for (int64_t e = 0; e < experts; ++e) {
        if (!taken[e / group_size]) choice[e] = ninf;
      }
      taken.assign(experts, 0);
      float total = 0;
      for (int64_t j = 0; j < p.top_k; ++j) {
        const int64_t e = best(choice);
        taken[e] = 1;
        cp[t * p.top_k + j] = e;
        wp[t * p.top_k + j] = scores[e];
        total += scores[e];
      }
      for (int64_t j = 0; j < p.top_k; ++j) {
        float w = wp[t * p.top_k + j];
        if (p.norm_topk_prob) w = w / (total + 1e-20f);
        wp[t * p.top_k + j] = w * scaling;
      }
    }
  });
  return {weights, chosen};
}

at::Tensor moe_experts(const at::Tensor& x_in, const at::Tensor& gate_up, const at::Tensor& down,
                       const Routing& routing) {
  auto x = x_in.contiguous();
  const int64_t tokens = x.size(0), hidden = x.size(1), top_k = routing.experts.size(1);
  const int64_t num_experts = gate_up.size(0);
  auto flat = routing.experts.reshape({-1}).to(at::kLong).contiguous();
  const int64_t* chosen = flat.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> assignments(num_experts);
  for (int64_t i = 0; i < flat.numel(); ++i) assignments[chosen[i]].push_back(i);
  // Each expert's assignments padded to whole tiles of kRowTile rows; every tile is one [kRowTile, K]
  // product with its expert's weights in one bmm (a tile's rows never meet another expert's).
  std::vector<int64_t> tile_expert, tile_token, tile_slot;  // per padded row: token (0 for padding), slot (-1)
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t count = static_cast<int64_t>(assignments[e].size());
    if (count == 0) continue;
    const int64_t padded = num_tiles(count) * kRowTile;
    for (int64_t i = 0; i < padded; i += kRowTile) tile_expert.push_back(e);
    for (int64_t i = 0; i < padded; ++i) {
      tile_token.push_back(i < count ? assignments[e][i] / top_k : 0);
      tile_slot.push_back(i < count ? assignments[e][i] : -1);
    }
  }
  const int64_t tiles = static_cast<int64_t>(tile_expert.size());
  auto which = at::tensor(tile_expert, at::kLong);
  auto xs = x.index_select(0, at::tensor(tile_token, at::kLong)).view({tiles, kRowTile, hidden});
  auto h = at::bmm(xs, gate_up.index_select(0, which).transpose(1, 2));
  auto y = at::bmm(batch_invariant::silu_and_mul(h), down.index_select(0, which).transpose(1, 2));
  // Row i = t * top_k + j: token t's j-th expert output.
  auto slots = at::tensor(tile_slot, at::kLong);
  auto real = slots >= 0;
  auto expert_out = at::empty({tokens * top_k, hidden}, x.options());
  expert_out.index_copy_(0, slots.masked_select(real), y.view({tiles * kRowTile, hidden}).index({real}));
  auto weights = routing.weights.to(at::kFloat).contiguous();
  auto out = at::empty({tokens, hidden}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "bi_moe_combine", [&] {
    const scalar_t* yp = expert_out.data_ptr<scalar_t>();
    const float* wp = weights.data_ptr<float>();
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, tokens, 16, [&](int64_t begin, int64_t end) {
      std::vector<float> acc(hidden);
      for (int64_t t = begin; t < end; ++t) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < top_k; ++j) {
          const float w = wp[t * top_k + j];
          const scalar_t* y = yp + (t * top_k + j) * hidden;
          for (int64_t d = 0; d < hidden; ++d) acc[d] += w * static_cast<float>(y[d]);
        }
        for (int64_t d = 0; d < hidden; ++d) op[t * hidden + d] = static_cast<scalar_t>(acc[d]);
      }
    });
  });
  return out;
}

}  // namespace batch_invariant

const KernelOps& batch_invariant_ops() {
  static const KernelOps table{
      .write_latent_cache = write_latent_cache,
      .mla_attention = batch_invariant::mla_attention,
      .rms_norm = batch_invariant::rms_norm,
      .add_rms_norm = batch_invariant::add_rms_norm,
      // Element-wise multiplies and adds in the tensor's dtype: one rounding per element, the same in any batch.
      .rotary = rotary,
      .silu_and_mul = batch_invariant::silu_and_mul,
      .route_noaux_tc = batch_invariant::route_noaux_tc,
      .moe_experts = batch_invariant::moe_experts,
      // Per-row softmax / sort / cumsum over the vocabulary and per-sequence verification.
      .sampling_probs = sampling_probs,
      .sample_and_verify = sample_and_verify,
      .linear = batch_invariant::linear,
      .head_matmul = batch_invariant::head_matmul,
  };
  return table;
}

}  // namespace mtpserve::kernels::cpu
