"""Once a second for argv[1] seconds, the share of the machine's CPU time since the last reading that was user, idle
and stolen (the hypervisor ran something else while this machine's vCPUs wanted to run), from /proc/stat:
a line `wall-clock  user  idle  steal`."""
import sys
import time


def counters():
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


end, last = time.time() + float(sys.argv[1]), counters()
while time.time() < end:
    time.sleep(1)
    now = counters()
    delta = [a - b for a, b in zip(now, last)]
    total, last = sum(delta) or 1, now
    print(f"{time.time():.3f} {delta[0] / total:.4f} {delta[3] / total:.4f} {delta[7] / total:.4f}", flush=True)
