"""Where a benchmark's processes run on the host's CPUs.

Server instances of one configuration can differ in their host work by 2x for their whole life (docs/benchmarks.md,
2026-11-29, twenty-seventh session). A busy thread that shares a physical core with another busy thread (an SMT
sibling) runs slower, and a benchmark client on the same host is such a thread. `split_cores` keeps the client on
cores of its own; `busy_threads` records where each process's busiest threads ran, so a slow instance can be
matched with its placement; `machine_times` and `stolen_share` say how much of the machine's CPU time the
hypervisor gave to other guests meanwhile (on the development VM the engine's step time moves with it,
docs/benchmarks.md, fifty-fifth session). Linux only (sysfs and procfs).
"""
from __future__ import annotations

import os
from itertools import groupby
from pathlib import Path

_CPU_DIR = Path("/sys/devices/system/cpu")
_TICKS = os.sysconf("SC_CLK_TCK")


def physical_cores(cpus: set[int]) -> list[list[int]]:
    """`cpus` grouped into physical cores (each core's hardware threads, ascending), ordered by their first CPU."""
    cores: dict[tuple[str, str], list[int]] = {}
    for cpu in sorted(cpus):
        topology = _CPU_DIR / f"cpu{cpu}" / "topology"
        try:
            key = ((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip())
        except OSError:  # no topology exposed: count the CPU as a core of its own
            key = ("cpu", str(cpu))
        cores.setdefault(key, []).append(cpu)
    return sorted(cores.values())


def split_cores(client_cores: int, cpus: set[int] | None = None) -> tuple[set[int], set[int]]:
    """(client CPUs, server CPUs): the last `client_cores` physical cores of `cpus` (default: the CPUs this process
    may run on) with all their hardware threads for the client, the other cores for the server."""
    cpus = set(os.sched_getaffinity(0) if cpus is None else cpus)
    cores = physical_cores(cpus)
    if not 0 < client_cores < len(cores):
        raise ValueError(f"--client-cores must leave the server at least one of the {len(cores)} physical cores "
                         f"this process may run on (CPUs {compact(cpus)}), got {client_cores}")
    client = {cpu for core in cores[-client_cores:] for cpu in core}
    return client, cpus - client


def compact(cpus) -> str:
    """A CPU list as taskset writes it: 0-3,8,10-11."""
    ranges = []
    # Consecutive CPUs share their distance from their index in the sorted list.
    for _, run in groupby(enumerate(sorted(cpus)), key=lambda pair: pair[1] - pair[0]):
        run = [cpu for _, cpu in run]
        ranges.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(ranges)


def thread_times(pid: int) -> dict[int, tuple[str, float, int]]:
    """Each thread of process `pid`: tid -> (name, CPU seconds so far, the CPU it last ran on). The process's main
    thread is named "main"; threads that exit while this reads are left out."""
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()  # fields[0] is the state, the 3rd field of stat(5)
        tid = int(task.name)
        threads[tid] = ("main" if tid == pid else name, (int(fields[11]) + int(fields[12])) / _TICKS, int(fields[36]))
    return threads


def busy_threads(before: dict, after: dict, seconds: float, top: int = 4) -> list[list]:
    """The `top` threads that used the most CPU between two `thread_times` snapshots `seconds` apart:
    [name, share of one core, the CPU it last ran on], busiest first."""
    used = [(cpu_s - before.get(tid, (name, 0.0, cpu))[1], name, cpu) for tid, (name, cpu_s, cpu) in after.items()]
    used.sort(reverse=True)
    return [[name, round(cpu_s / seconds, 3) if seconds > 0 else None, cpu] for cpu_s, name, cpu in used[:top]]


def machine_times() -> list[int]:
    """The whole machine's CPU time so far in clock ticks, by kind: user, nice, system, idle, iowait, irq, softirq,
    steal, ... (the first line of /proc/stat)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def stolen_share(before: list[int], after: list[int]) -> float | None:
    """The share of the machine's CPU time between two `machine_times` snapshots that was stolen: time its CPUs
    wanted to run while the hypervisor ran another guest. None where no time passed. Guest time (the 9th and 10th
    kinds) is already counted in user time, so it is left out of the total."""
    delta = [a - b for a, b in zip(after[:8], before[:8])]
    total = sum(delta)
    return delta[7] / total if total > 0 else None
