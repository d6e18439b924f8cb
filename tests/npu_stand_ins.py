"""CPU stand-ins for the torch_npu ops the NPU kernels call, registered under exactly the schemas torch_npu
2.13.0 declares (SCHEMAS; tests/test_npu_host_path.py checks them against the wheel's libtorch_npu.so).

Each implements the op's documented semantics (torch_npu/_op_plugin_docs.py of the wheel) in plain torch, for
the subset of arguments mtpserve uses, and rejects what the documentation rules out where our calls could break
it: non-contiguous attention inputs, out-of-range scatter indices, a causal mask other than the 2048 x 2048 one,
more than 16 query rows with MLA, unsupported modes. The NPU's dimension limits (MLA only at D = 512, rope 64,
32/64/128 heads; dtypes) are not enforced, so that the small embedded model runs: this checks our calls, not
the NPU. Rounding follows mtpserve's CPU kernels where the documentation leaves it open.
"""
from __future__ import annotations

import torch

SCHEMAS = {
    "npu_rms_norm": "npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    "npu_add_rms_norm":
        "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor, Tensor)",
    "npu_rotary_mul":
        "npu_rotary_mul(Tensor input, Tensor r1, Tensor r2, str rotary_mode='half', Tensor? rotate=None) -> Tensor",
    "npu_swiglu": "npu_swiglu(Tensor input, int dim=-1) -> Tensor",
    "npu_scatter_nd_update_":
        "npu_scatter_nd_update_(Tensor(a!) input, Tensor indices, Tensor updates) -> Tensor(a!)",
    "npu_fused_infer_attention_score": (
        "npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, "
        "Tensor? atten_mask=None, SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, "
        "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
        "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? antiquant_scale=None, "
        "Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, "
        "Tensor? value_antiquant_scale=None, Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
        "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, "
        "Tensor? value_shared_prefix=None, SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, "
        "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, float scale=1.0, "
        "int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", "
        "int num_key_value_heads=0, int sparse_mode=0, int inner_precise=0, int block_size=0, "
        "int antiquant_mode=0, int key_antiquant_mode=0, int value_antiquant_mode=0, "
        "bool softmax_lse_flag=False) -> (Tensor, Tensor)"),
    "npu_moe_gating_top_k": (
        "npu_moe_gating_top_k(Tensor x, int k, *, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
        "int k_group=1, int group_count=1, int group_select_mode=0, int renorm=0, int norm_type=0, "
        "bool out_flag=False, float routed_scaling_factor=1.0, float eps=1e-20) -> (Tensor, Tensor, Tensor)"),
    "npu_moe_init_routing_v2": (
        "npu_moe_init_routing_v2(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, "
        "int active_num=-1, int expert_capacity=-1, int expert_num=-1, int drop_pad_mode=0, "
        "int expert_tokens_num_type=0, bool expert_tokens_num_flag=False, int quant_mode=-1, "
        "int[2] active_expert_range=[], int row_idx_type=0, int? x_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)"),
    "npu_grouped_matmul": (
        "npu_grouped_matmul(Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
        "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
        "Tensor[]? per_token_scale=None, Tensor? group_list=None, Tensor[]? activation_input=None, "
        "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, int? split_item=0, "
        "int? group_type=None, int? group_list_type=0, int? act_type=0, int[]? tuning_config=None, "
        "int? output_dtype=None, int? x_dtype=None, int? weight_dtype=None, int? scale_dtype=None, "
        "int? per_token_scale_dtype=None) -> Tensor[]"),
    "npu_moe_token_unpermute": (
        "npu_moe_token_unpermute(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, "
        "bool padded_mode=False, int[]? restore_shape=None) -> Tensor"),
}

MASK_SIZE = 2048
MLA_MAX_QUERY_ROWS = 16


class StandInError(ValueError):
    """A call that the op's documentation rules out."""


def require(ok: bool, message: str) -> None:
    if not ok:
        raise StandInError(message)


def rms_norm(input, gamma, epsilon=1e-6):
    x = input.float()
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon)
    return gamma * (x * rstd).to(input.dtype), rstd


def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    x = x1 + x2
    y, rstd = rms_norm(x, gamma, epsilon)
    return y, rstd, x


def rotary_mul(input, r1, r2, rotary_mode="half", rotate=None):
    require(input.dim() == 4 and r1.dim() == 4 and r2.dim() == 4, "npu_rotary_mul: input, r1 and r2 must be 4-D")
    require(rotary_mode == "half" and rotate is None, "npu_rotary_mul: the stand-in implements rotary_mode='half'")
    x1, x2 = input.chunk(2, -1)
    return r1 * input + r2 * torch.cat([-x2, x1], -1)


def swiglu(input, dim=-1):
    a, b = input.chunk(2, dim)
    return torch.nn.functional.silu(a) * b


def scatter_nd_update_(input, indices, updates):
    require(indices.dim() >= 2 and indices.size(-1) <= input.dim(), "npu_scatter_nd_update_: indices must be [..., a]")
    bounds = torch.tensor(input.shape[:indices.size(-1)])
    require(bool(((indices >= 0) & (indices < bounds)).all()), "npu_scatter_nd_update_: an index is out of range "
            "(the op does not support out-of-range indices)")
    flat = indices.reshape(-1, indices.size(-1)).long()
    input[tuple(flat.t())] = updates.reshape(flat.size(0), *input.shape[indices.size(-1):])
    return input


def _check_fia_call(query, key, value, query_rope, key_rope, block_table, atten_mask, input_layout, sparse_mode,
                    num_key_value_heads, unused):
    require(all(v is None for v in unused.values()),
            "npu_fused_infer_attention_score: the stand-in implements neither quantisation, pse, padding nor prefix")
    require(query_rope is not None and key_rope is not None, "npu_fused_infer_attention_score: the stand-in "
            "implements MLA (query_rope and key_rope together)")
    for name, t in (("query", query), ("key", key), ("value", value), ("query_rope", query_rope),
                    ("key_rope", key_rope)):
        require(t.is_contiguous(), f"npu_fused_infer_attention_score: {name} must be contiguous")
    require(key.data_ptr() == value.data_ptr() or torch.equal(key, value),
            "npu_fused_infer_attention_score: absorbed MLA attends over the latent as key and value")
    require(input_layout in ("TND", "TND_NTD"), "npu_fused_infer_attention_score: the stand-in implements TND layouts")
    require(block_table is not None and block_table.dtype == torch.int32 and block_table.dim() == 2,
            "npu_fused_infer_attention_score: block_table must be int32 [B, max_blocks] (page attention)")
    require(num_key_value_heads == 1, "npu_fused_infer_attention_score: MLA has one KV head")
    require(sparse_mode in (0, 3), "npu_fused_infer_attention_score: MLA takes sparse_mode 0 or 3")
    if sparse_mode == 3:
        causal = torch.ones(MASK_SIZE, MASK_SIZE, dtype=torch.bool).triu(1)
        require(atten_mask is not None and atten_mask.shape == (MASK_SIZE, MASK_SIZE) and
                atten_mask.dtype in (torch.bool, torch.int8, torch.uint8) and torch.equal(atten_mask.bool(), causal),
                "npu_fused_infer_attention_score: sparse_mode 3 needs the optimised 2048 x 2048 mask, 1 above "
                "the diagonal")
    else:
        require(atten_mask is None, "npu_fused_infer_attention_score: sparse_mode 0 with MLA takes no mask")


def fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
                                actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None,
                                dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
                                antiquant_offset=None, key_antiquant_scale=None, key_antiquant_offset=None,
                                value_antiquant_scale=None, value_antiquant_offset=None, block_table=None,
                                query_padding_size=None, kv_padding_size=None, key_shared_prefix=None,
                                value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None,
                                key_rope=None, key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
                                pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH",
                                num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
                                antiquant_mode=0, key_antiquant_mode=0, value_antiquant_mode=0,
                                softmax_lse_flag=False):
    unused = dict(pse_shift=pse_shift, dequant_scale1=dequant_scale1, quant_scale1=quant_scale1,
                  dequant_scale2=dequant_scale2, quant_scale2=quant_scale2, quant_offset2=quant_offset2,
                  antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                  key_antiquant_scale=key_antiquant_scale, key_antiquant_offset=key_antiquant_offset,
                  value_antiquant_scale=value_antiquant_scale, value_antiquant_offset=value_antiquant_offset,
                  query_padding_size=query_padding_size, kv_padding_size=kv_padding_size,
                  key_shared_prefix=key_shared_prefix, value_shared_prefix=value_shared_prefix,
                  actual_shared_prefix_len=actual_shared_prefix_len, key_rope_antiquant_scale=key_rope_antiquant_scale)
    _check_fia_call(query, key, value, query_rope, key_rope, block_table, atten_mask, input_layout, sparse_mode,
                    num_key_value_heads, unused)
    tokens, heads, _ = query.shape
    require(heads == num_heads, "npu_fused_infer_attention_score: num_heads must be query's N (TND)")
    # TND: actual_seq_lengths are cumulative query ends, one per batch; page attention:
    # actual_seq_lengths_kv are each batch's own KV length.
    ends = list(actual_seq_lengths or [])
    lens_kv = list(actual_seq_lengths_kv or [])
    require(len(ends) == block_table.size(0) == len(lens_kv) and ends and ends[-1] == tokens and
            all(b >= a for a, b in zip([0] + ends, ends)),
            "npu_fused_infer_attention_score: TND needs cumulative actual_seq_lengths ending at T, and one "
            "actual_seq_lengths_kv and block_table row per batch")
    require(block_size == key.size(1), "npu_fused_infer_attention_score: block_size must be the cache's block length")
    out = torch.empty(tokens, heads, value.size(-1), dtype=query.dtype)
    flat_kv = torch.cat([key, key_rope], -1).reshape(-1, key.size(-1) + key_rope.size(-1))
    start = 0
    for b, (end, kv_len) in enumerate(zip(ends, lens_kv)):
        rows = end - start
        require(1 <= rows <= MLA_MAX_QUERY_ROWS and rows <= kv_len,
                "npu_fused_infer_attention_score: MLA takes 1..16 query rows per batch, no more than its KV length")
        require(sparse_mode == 3 or rows == 1, "npu_fused_infer_attention_score: more than one query row needs "
                "sparse_mode 3")
        require(-(-kv_len // block_size) <= block_table.size(1), "npu_fused_infer_attention_score: block_table "
                "is narrower than the KV length")
        pos = torch.arange(kv_len)
        slots = block_table[b].long()[pos // block_size] * block_size + pos % block_size
        keys = flat_kv.index_select(0, slots).float()
        q = torch.cat([query[start:end], query_rope[start:end]], -1).float().reshape(rows * heads, -1)
        scores = (q @ keys.t() * scale).view(rows, heads, kv_len)
        # rightDownCausal: row i of n sees positions <= kv_len - n + i.
        visible = pos.view(1, -1) <= (kv_len - rows + torch.arange(rows)).view(-1, 1)
        scores = scores.masked_fill(~visible.unsqueeze(1), float("-inf"))
        probs = torch.softmax(scores, -1).view(rows * heads, kv_len)
        out[start:end] = (probs @ keys[:, :value.size(-1)]).view(rows, heads, -1).to(query.dtype)
        start = end
    lse = torch.zeros(1, dtype=torch.float32)
    return (out.transpose(0, 1).contiguous() if input_layout == "TND_NTD" else out), lse


def moe_gating_top_k(x, k, *, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                     group_select_mode=0, renorm=0, norm_type=0, out_flag=False, routed_scaling_factor=1.0,
                     eps=1e-20):
    tokens, experts = x.shape
    per_group = experts // max(group_count, 1)
    require(experts <= 2048 and group_count > 0 and experts % group_count == 0 and per_group > 2,
            "npu_moe_gating_top_k: experts must split into group_count groups of more than 2 (<= 2048 experts)")
    require(1 <= k_group <= group_count and 1 <= k <= per_group * k_group,
            "npu_moe_gating_top_k: need 1 <= k_group <= group_count and 1 <= k <= experts / group_count * k_group")
    require(renorm == 0 and input_ids is None and tid2eid is None, "npu_moe_gating_top_k: renorm 0 only, no hash mode")
    require(bias is None or (bias.shape == (experts,) and bias.dtype == x.dtype),
            "npu_moe_gating_top_k: bias must be [experts] in x's dtype")
    norm = x.float().sigmoid() if norm_type == 1 else x.float().softmax(-1)
    choice = norm if bias is None else norm + bias.float()
    grouped = choice.view(tokens, group_count, per_group)
    group_scores = grouped.topk(2, -1)[0].sum(-1) if group_select_mode == 1 else grouped.amax(-1)
    groups = group_scores.topk(k_group, -1, True, False)[1]
    keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, groups, True)
    choice = choice.masked_fill(~keep.repeat_interleave(per_group, 1), float("-inf"))
    chosen = choice.topk(k, -1, True, False)[1]
    y = norm.gather(1, chosen)
    y = y / (y.sum(-1, keepdim=True) + eps) * routed_scaling_factor
    return y.to(x.dtype), chosen.int(), norm


def moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1, expert_capacity=-1, expert_num=-1,
                        drop_pad_mode=0, expert_tokens_num_type=0, expert_tokens_num_flag=False, quant_mode=-1,
                        active_expert_range=(), row_idx_type=0, x_dtype=None):
    require(x.dim() == 2 and expert_idx.dim() == 2 and expert_idx.size(0) == x.size(0) and
            expert_idx.dtype == torch.int32, "npu_moe_init_routing_v2: x [rows, H] and int32 expert_idx [rows, K]")
    require(drop_pad_mode == 0 and quant_mode == -1 and scale is None and offset is None and row_idx_type == 0,
            "npu_moe_init_routing_v2: the stand-in implements dropless, unquantised routing with gather indices")
    require(expert_tokens_num_type == 1 and expert_tokens_num_flag, "npu_moe_init_routing_v2: expert_tokens_num_type "
            "1 (counts) with expert_tokens_num_flag")
    first, last = active_expert_range if len(active_expert_range) == 2 else (0, expert_num)
    require(0 <= first < last <= expert_num, "npu_moe_init_routing_v2: active_expert_range must lie in [0, expert_num]")
    rows, top_k = expert_idx.shape
    flat = expert_idx.reshape(-1).long()
    active = (flat >= first) & (flat < last)
    # Expanded rows are the (row, k) pairs sorted by expert, ties in (row, k) order.
    order = torch.sort(torch.where(active, flat, expert_num), stable=True)[1][:int(active.sum())]
    if active_num > 0:
        order = order[:active_num]
    expanded_x = torch.zeros(rows * top_k, x.size(1), dtype=x.dtype)
    expanded_x[:order.numel()] = x.index_select(0, order // top_k)
    # row_idx_type 0: for each (row, k), the expanded row it went to; -1 where it was not routed.
    expanded_row_idx = torch.full((rows * top_k,), -1, dtype=torch.int32)
    expanded_row_idx[order] = torch.arange(order.numel(), dtype=torch.int32)
    counts = torch.bincount(flat[order] - first, minlength=last - first).long()
    return expanded_x, expanded_row_idx, counts, torch.zeros(rows * top_k, dtype=torch.float32)


def grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
                   per_token_scale=None, group_list=None, activation_input=None, activation_quant_scale=None,
                   activation_quant_offset=None, split_item=0, group_type=None, group_list_type=0, act_type=0,
                   tuning_config=None, output_dtype=None, x_dtype=None, weight_dtype=None, scale_dtype=None,
                   per_token_scale_dtype=None):
    quant = (bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale, activation_input,
             activation_quant_scale, activation_quant_offset)
    require(all(q is None for q in quant) and act_type == 0, "npu_grouped_matmul: the stand-in implements plain "
            "matmuls")
    require(len(x) == 1 and len(weight) == 1 and group_type == 0 and split_item in (2, 3),
            "npu_grouped_matmul: the stand-in implements one x split along M over one 3-D weight (group_type 0, "
            "split_item 2/3)")
    rows, w = x[0], weight[0]
    require(rows.dim() == 2 and w.dim() == 3 and w.size(1) == rows.size(1), "npu_grouped_matmul: x [M, K], weight "
            "[E, K, N]")
    require(group_list is not None and group_list.numel() == w.size(0) <= 1024, "npu_grouped_matmul: group_list "
            "needs one entry per weight group (at most 1024)")
    counts = group_list.long()
    if group_list_type == 0:  # cumulative
        counts = torch.diff(counts, prepend=counts.new_zeros(1))
    require(bool((counts >= 0).all()) and int(counts.sum()) == rows.size(0),
            "npu_grouped_matmul: the groups must cover x's rows exactly")
    out = torch.empty(rows.size(0), w.size(2), dtype=rows.dtype)
    start = 0
    for e, n in enumerate(counts.tolist()):
        if n:
            out[start:start + n] = torch.nn.functional.linear(rows[start:start + n], w[e].t())
        start += n
    return [out]


def moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    require(not padded_mode, "npu_moe_token_unpermute: padded_mode must be False")
    top_k = 1 if probs is None else probs.size(1)
    require(sorted_indices.dim() == 1 and sorted_indices.numel() % top_k == 0 and
            bool(((sorted_indices >= 0) & (sorted_indices < permuted_tokens.size(0))).all()),
            "npu_moe_token_unpermute: sorted_indices must index permuted_tokens, tokens * topK of them")
    # out[i] = sum_k permuted_tokens[sorted_indices[i * topK + k]] * probs[i, k]
    rows = permuted_tokens.index_select(0, sorted_indices.long()).view(-1, top_k, permuted_tokens.size(1))
    weights = torch.ones(rows.shape[:2]) if probs is None else probs.float()
    return (rows.float() * weights.unsqueeze(-1)).sum(1).to(permuted_tokens.dtype)


IMPLS = {
    "npu_rms_norm": rms_norm, "npu_add_rms_norm": add_rms_norm, "npu_rotary_mul": rotary_mul,
    "npu_swiglu": swiglu, "npu_scatter_nd_update_": scatter_nd_update_,
    "npu_fused_infer_attention_score": fused_infer_attention_score, "npu_moe_gating_top_k": moe_gating_top_k,
    "npu_moe_init_routing_v2": moe_init_routing_v2, "npu_grouped_matmul": grouped_matmul,
    "npu_moe_token_unpermute": moe_token_unpermute,
}

_library = None


def register() -> None:
    """Defines the npu:: schemas with these CPU implementations, once per process (not where torch_npu is)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("npu", "FRAGMENT")
    for name, schema in SCHEMAS.items():
        _library.define(schema)
        _library.impl(name, IMPLS[name], "CPU")
