import random, time, torch
from mtpserve import _C
torch.set_num_threads(2)
HEADS, LORA, ROPE, BLOCK = 4, 64, 16, 16
def setup(qlens, seed=0):
    rng = random.Random(seed)
    ctx = [rng.randrange(200, 768) for _ in qlens]
    nblocks = sum(-(-c // BLOCK) for c in ctx) + 8
    blocks = list(range(nblocks)); rng.shuffle(blocks)
    tables = [[blocks.pop() for _ in range(-(-c // BLOCK))] for c in ctx]
    width = max(len(t) for t in tables)
    cache = torch.randn(nblocks, BLOCK, LORA + ROPE)
    qs = [0]
    for n in qlens: qs.append(qs[-1] + n)
    q = torch.randn(qs[-1], HEADS, LORA + ROPE)
    args = (q, cache, torch.tensor([t + [0]*(width-len(t)) for t in tables], dtype=torch.int32),
            torch.tensor(qs, dtype=torch.int32), torch.tensor(ctx, dtype=torch.int32), max(qlens), max(ctx), LORA, 0.1)
    return args
def bench(qlens, n=200):
    a = setup(qlens)
    for _ in range(10): _C.mla_attention(*a)
    t = time.perf_counter()
    for _ in range(n): _C.mla_attention(*a)
    return (time.perf_counter() - t) / n * 1e3
for name, ql in [("all1", [1]*32), ("all2", [2]*32), ("all4", [4]*32), ("mix 60%4/40%2", [4]*19+[2]*13), ("mix half4 half1", [4]*16+[1]*16)]:
    print(name, f"{bench(ql):.3f} ms per layer call")
print("--- 16 seqs (the c=32 decode steps' size)")
for name, ql in [("all1", [1]*16), ("all4", [4]*16), ("mix 12x4 + 4x1", [4]*12+[1]*4), ("12x4 alone", [4]*12), ("4x1 alone", [1]*4), ("mix 10x4 4x2 2x1", [4]*10+[2]*4+[1]*2)]:
    print(name, f"{bench(ql):.3f} ms per layer call")
