# Attention calls with the engine's predecessor between them: q assembled by torch.cat (q_latent, q_rope), then
# (As run, its graph capture was written out here; it now calls gpu_timing.captured, which does the same.)
# the attention, B = 16 and 64, k = 0..3, per-iteration us from a CUDA graph; plus a race check: graph replays
# of back-to-back ragged calls (empty splits, outputs dropped) equal eager calls bit for bit.
import sys, torch
sys.path.insert(0, "scripts")
from gpu_timing import captured, graph_us
from mtpserve import _C
g = torch.Generator(device="cuda").manual_seed(3)
H, D, LORA, BS, CTX = 16, 576, 512, 64, 8192
ROT = 256 << 20
for B in (16, 64):
    per = CTX // BS
    sets = max(1, -(-ROT // (B * CTX * D * 2)))
    pool = torch.randn(sets * B * per, BS, D, device="cuda", dtype=torch.bfloat16, generator=g)
    tables = list(torch.randperm(sets * B * per, device="cuda", generator=g).to(torch.int32).view(sets, B, per).unbind(0))
    for k in range(4):
        rows = B * (k + 1)
        lat = torch.randn(rows, H, LORA, device="cuda", dtype=torch.bfloat16, generator=g)
        rope = torch.randn(rows, H, D - LORA, device="cuda", dtype=torch.bfloat16, generator=g)
        qs = torch.arange(B + 1, device="cuda", dtype=torch.int32) * (k + 1)
        cl = torch.full((B,), CTX, device="cuda", dtype=torch.int32)
        inner = max(len(tables), 8)
        def run_all():
            for i in range(inner):
                q = torch.cat([lat, rope], -1)
                _C.mla_attention(q, pool, tables[i % len(tables)], qs, cl, k + 1, CTX, LORA, D ** -0.5)
        def cat_only():
            for i in range(inner):
                torch.cat([lat, rope], -1)
        print(f"B={B} k={k} cat+attention {graph_us(run_all, inner, 20):.1f} us, cat alone {graph_us(cat_only, inner, 20):.1f} us", flush=True)
    del pool, tables
    torch.cuda.empty_cache()

# race check
cases = [[1, 100, 5000, 777, 64, 8192], [8192] * 16, [3000, 1, 8191, 64], [8192]]
calls = []
for ctxs in cases * 2:
    k = 2
    Bn = len(ctxs); width = max(-(-c // BS) for c in ctxs)
    pool = torch.randn(Bn * width + 3, BS, D, device="cuda", dtype=torch.bfloat16, generator=g)
    tab = torch.randperm(Bn * width + 3, device="cuda", generator=g)[: Bn * width].to(torch.int32).view(Bn, width)
    q = torch.randn(Bn * (k + 1), H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    qs = torch.arange(Bn + 1, device="cuda", dtype=torch.int32) * (k + 1)
    cl = torch.tensor(ctxs, device="cuda", dtype=torch.int32)
    calls.append((q, pool, tab, qs, cl, k + 1, max(ctxs), LORA, D ** -0.5))
eager = [_C.mla_attention(*c).clone() for c in calls]
kept = []
def replay_all():
    kept.clear()
    for c in calls:
        kept.append(_C.mla_attention(*c))
graph = captured(replay_all)
bad = 0
for _ in range(20):
    graph.replay(); torch.cuda.synchronize()
    bad += sum(int(not torch.equal(a, b)) for a, b in zip(kept, eager))
print(f"race check: {bad} unequal outputs over 20 replays x {len(calls)} calls")
