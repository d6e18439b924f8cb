"""Each version's outputs (tests.sh's dumps) against version A's, case by case: bitwise equal, or the largest
difference."""
import glob
import os
import sys

import torch

folder = sys.argv[1]
base = torch.load(os.path.join(folder, "A.pt"))
for path in sorted(glob.glob(os.path.join(folder, "*.pt"))):
    name = os.path.basename(path)[:-3]
    if name == "A":
        continue
    other = torch.load(path)
    same = [c for c in base if torch.equal(base[c], other[c])]
    worst = max(((base[c].float() - other[c].float()).abs().max().item(), c) for c in base)
    print(f"{name}: {len(same)} of {len(base)} cases bitwise equal to A; largest difference {worst[0]:.3g} ({worst[1]})")
