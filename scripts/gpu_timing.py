"""CUDA-event timing shared by the GPU benchmarks: medians of single calls, calls replayed from one CUDA
graph (as the engine runs decode steps, so host launch gaps do not count), sustained replay with the clock
and power it runs at, the copy bandwidth that the floors are measured against, and a profile's kernels."""
import collections
import statistics
import subprocess
import time

import torch


def median_us(fn, reps: int, per_timing: int = 1, warmup: int = 3) -> float:
    """Median over `reps` CUDA-event timings of fn(), divided by the calls fn makes (`per_timing`)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / per_timing)
    return statistics.median(times)


def captured(run_all) -> torch.cuda.CUDAGraph:
    """run_all() once eagerly (warming up lazy state), then captured in a CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run_all()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_all()
    return graph


def graph_us(run_all, calls: int, reps: int) -> float:
    """Per-call time of run_all(), which makes `calls` calls, replayed from a CUDA graph it is captured in."""
    graph = captured(run_all)
    us = median_us(graph.replay, reps, per_timing=calls)
    del graph
    return us


def sustained(run_all, calls: int, seconds: float) -> dict:
    """Per-call time of run_all() replayed from a CUDA graph back to back for `seconds`, with the medians of the
    SM clock and power draw that nvidia-smi reports meanwhile and the clock-limit reasons it saw (hex masks;
    0x4 is the power cap). A short timing can run at a higher clock than sustained load allows."""
    graph = captured(run_all)
    smi = subprocess.Popen(["nvidia-smi", f"--id={torch.cuda.current_device()}", "--format=csv,noheader,nounits",
                            "--query-gpu=clocks.sm,power.draw,clocks_event_reasons.active", "-lms", "100"],
                           stdout=subprocess.PIPE, text=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replays, began = 0, time.monotonic()
    start.record()
    while time.monotonic() - began < seconds:
        for _ in range(10):
            graph.replay()
        replays += 10
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    smi.terminate()
    samples = [line.split(", ") for line in smi.communicate()[0].strip().splitlines()]
    del graph
    return dict(sustained_us=start.elapsed_time(end) * 1e3 / (replays * calls),
                sm_clock_mhz=statistics.median(float(s[0]) for s in samples),
                power_w=statistics.median(float(s[1]) for s in samples),
                clock_limits=sorted({s[2] for s in samples}))


def copy_bandwidth(reps: int) -> float:
    """Bytes read + written per second of a 1 GiB device-to-device copy_."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = median_us(lambda: dst.copy_(src), reps)
    return 2 * (1 << 30) / (us * 1e-6)


def kernel_events(prof) -> dict[str, list[float]]:
    """The device microseconds of every kernel and copy in a torch.profiler profile, by name."""
    events = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            events[e.name].append(e.time_range.elapsed_us())
    return events


def kernel_table(prof, top: int, steps: int = 1) -> list[str]:
    """The device's kernels and copies in a profile, the most time first: count, mean and total microseconds; per
    step where the profile spans `steps` engine steps."""
    kernels = kernel_events(prof)
    total = sum(sum(v) for v in kernels.values())
    unit = " per step" if steps > 1 else ""
    lines = [f"device: {sum(len(v) for v in kernels.values()) / steps:.4g} kernels and copies{unit}, "
             f"{total / steps:.1f} us{unit}",
             f"| kernel | count{unit} | mean us | us{unit} |", "|---|---:|---:|---:|"]
    for name, times in sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:top]:
        lines.append(f"| {name[:90]} | {len(times) / steps:.4g} | {sum(times) / len(times):.2f} | "
                     f"{sum(times) / steps:.1f} |")
    return lines


def host_table(prof, top: int, steps: int = 1) -> list[str]:
    """The host's calls: the CUDA runtime's (kernel launches against graph launches, copies, synchronizations) and
    the ATen ops, the most time first, with their own host time (without the calls inside them); per step where the
    profile spans `steps` engine steps."""
    calls = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            calls[e.name].append(e.self_cpu_time_total)
    unit = " per step" if steps > 1 else ""
    lines = []
    for kind, prefix in (("CUDA runtime call", "cuda"), ("ATen op", "aten::")):
        chosen = {name: v for name, v in calls.items() if name.startswith(prefix)}
        lines += [f"| {kind} ({sum(len(v) for v in chosen.values()) / steps:.4g} calls{unit}) | calls{unit} | "
                  f"host us{unit} |", "|---|---:|---:|"]
        for name, times in sorted(chosen.items(), key=lambda kv: -sum(kv[1]))[:top]:
            lines.append(f"| {name} | {len(times) / steps:.4g} | {sum(times) / steps:.1f} |")
        lines.append("")
    return lines[:-1]


def kernel_times(prof, calls: int) -> list:
    """(kernel, mean us per call, % of all kernel time) from a profile of `calls` calls, longest first."""
    per_kernel = {}
    for full_name, times in kernel_events(prof).items():
        name = full_name.replace("void ", "").replace("mtpserve::kernels::cuda::(anonymous namespace)::", "")[:90]
        per_kernel[name] = per_kernel.get(name, 0.0) + sum(times)
    total = sum(per_kernel.values())
    return sorted(((name, us / calls, 100 * us / total) for name, us in per_kernel.items()), key=lambda k: -k[1])


def profiled_kernels(fn, calls: int, warmup: int = 3) -> list:
    """kernel_times of fn(0) .. fn(calls - 1) run under torch.profiler, after fn(0) .. fn(warmup - 1)."""
    for i in range(warmup):
        fn(i)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(i)
        torch.cuda.synchronize()
    return kernel_times(prof, calls)
