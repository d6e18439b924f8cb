"""Once a second for argv[1] seconds, the share of the machine's CPU time since the last reading that was user, idle
and stolen (the hypervisor ran another guest while this machine's vCPUs wanted to run), from /proc/stat:
a line `wall-clock  user  idle  steal`."""
import sys
import time

from mtpserve.bench.cpu_placement import machine_times, stolen_share

end, last = time.time() + float(sys.argv[1]), machine_times()
while time.time() < end:
    time.sleep(1)
    now = machine_times()
    delta = [a - b for a, b in zip(now[:8], last[:8])]
    total = sum(delta) or 1
    print(f"{time.time():.3f} {delta[0] / total:.4f} {delta[3] / total:.4f} {stolen_share(last, now) or 0.0:.4f}",
          flush=True)
    last = now
