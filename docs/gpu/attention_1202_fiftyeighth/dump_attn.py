import sys, torch
from mtpserve import _C
g = torch.Generator(device="cuda").manual_seed(7)
H, D, LORA, BS = 16, 576, 512, 64
out = {}
def case(name, ctxs, k, scale):
    B = len(ctxs)
    width = max(-(-c // BS) for c in ctxs)
    pool = torch.randn(B * width + 3, BS, D, device="cuda", dtype=torch.bfloat16, generator=g)
    tables = torch.randperm(B * width + 3, device="cuda", generator=g)[: B * width].to(torch.int32).view(B, width)
    q = torch.randn(B * (k + 1), H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    qs = (torch.arange(B + 1, device="cuda", dtype=torch.int32) * (k + 1))
    cl = torch.tensor(ctxs, device="cuda", dtype=torch.int32)
    out[name] = _C.mla_attention(q, pool, tables, qs, cl, k + 1, max(ctxs), LORA, scale).cpu()
for k in range(4):
    case(f"b16k{k}", [8192] * 16, k, D ** -0.5)
    case(f"b64k{k}", [8192] * 64, k, D ** -0.5)
    case(f"peak_b16k{k}", [8192] * 16, k, 1.0)
case("ragged", [1, 100, 5000, 777, 64, 8192], 2, D ** -0.5)
case("b1k3", [8192], 3, D ** -0.5)
torch.save(out, sys.argv[1])
print("dumped", len(out))
