"""Where a kernel's warps wait, instruction by instruction: Nsight Compute's PC-sampling stall counters of one profiled
launch (an .ncu-rep with the SourceCounters section), joined per SASS instruction. Prints each stall reason's share
of the samples, then the instructions that hold the most samples with their leading reasons, until they cover 90%.
Runs where Nsight Compute is installed (its extras/python holds ncu_report):
    python3 scripts/ncu_ledger.py REPORT.ncu-rep [KERNEL_SUBSTRING]"""
import collections
import glob
import os
import shutil
import sys


def ncu_report_module():
    ncu = os.path.realpath(shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    for pattern in (os.path.join(os.path.dirname(ncu), "extras", "python"),
                    os.path.join(os.path.dirname(ncu), "..", "extras", "python"),
                    "/usr/local/cuda*/nsight-compute*/extras/python", "/opt/nvidia/nsight-compute/*/extras/python"):
        for path in glob.glob(pattern):
            sys.path.append(path)
    import ncu_report
    return ncu_report


def per_pc(action, name):
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_correlation_ids():
        return {}
    pcs = metric.correlation_ids()
    return {pcs.as_uint64(i): metric.as_uint64(i) for i in range(metric.num_instances())}


def main(path, kernel=""):
    report = ncu_report_module().load_report(path)
    actions = [report.range_by_idx(r).action_by_idx(a) for r in range(report.num_ranges())
               for a in range(report.range_by_idx(r).num_actions())]
    action = next(a for a in actions if kernel in a.name())
    print(action.name()[:160])
    prefix = "smsp__pcsamp_warps_issue_stalled_"
    reasons = {n[len(prefix):]: per_pc(action, n) for n in action.metric_names()
               if n.startswith(prefix) and not n.endswith("_not_issued")}
    reasons = {r: v for r, v in reasons.items() if v}
    executed = per_pc(action, "inst_executed") or per_pc(action, "smsp__inst_executed")
    by_pc = collections.defaultdict(collections.Counter)
    for reason, values in reasons.items():
        for pc, n in values.items():
            if n:
                by_pc[pc][reason] += n
    total = sum(sum(c.values()) for c in by_pc.values())
    print(f"{total} stall samples over {len(by_pc)} instructions")
    overall = collections.Counter()
    for c in by_pc.values():
        overall.update(c)
    for reason, n in overall.most_common(12):
        print(f"  {reason:24s} {100 * n / total:5.1f}%")
    order = sorted(by_pc, key=lambda pc: -sum(by_pc[pc].values()))
    covered, base = 0, min(by_pc) if by_pc else 0
    print("\n  offset  share  executed  reasons                                      instruction")
    for pc in order:
        n = sum(by_pc[pc].values())
        top = ", ".join(f"{r} {100 * v / n:.0f}%" for r, v in by_pc[pc].most_common(3))
        print(f"  {pc - base:6x} {100 * n / total:5.1f}% {executed.get(pc, 0):9d}  {top:44s} {action.sass_by_pc(pc)}")
        covered += n
        if covered >= 0.9 * total:
            break


if __name__ == "__main__":
    main(*sys.argv[1:])
