"""Times a fixed piece of pure-Python work and a 64 MB memory copy, about ten times a second, for argv[1] seconds:
a line `wall-clock  python_ms  copy_ms` each. If the machine's speed drifts, these drift with it."""
import sys
import time

import torch

src, dst = torch.empty(16 << 20), torch.empty(16 << 20)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    t0 = time.perf_counter()
    sum(i * i for i in range(200000))
    t1 = time.perf_counter()
    dst.copy_(src)
    t2 = time.perf_counter()
    print(f"{time.time():.3f} {(t1 - t0) * 1e3:.3f} {(t2 - t1) * 1e3:.3f}", flush=True)
    time.sleep(0.08)
