import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
bad = [n for n in a if not torch.equal(a[n], b[n])]
for n in a:
    d = (a[n].float() - b[n].float()).abs().max().item()
    if n in bad: print(f"  {n}: differs, max abs diff {d:.3g}, nan {a[n].isnan().any().item()}/{b[n].isnan().any().item()}")
print(f"bitwise equal: {len(a) - len(bad)} of {len(a)}")
