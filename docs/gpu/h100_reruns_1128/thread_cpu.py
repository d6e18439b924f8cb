"""Samples the CPU time of every thread of every running mtpserve server (`mtpserve.cli serve`) on this Linux
machine, four times a second, until killed: one JSON line per sample, {"t": wall seconds, "pid", "threads":
{tid: [comm, utime + stime in clock ticks]}}. The main thread (tid == pid) runs the HTTP server's event loop."""
import json
import os
import sys
import time


def servers() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            if b"mtpserve.cli" in cmd and b"serve" in cmd:
                pids.append(int(name))
    return pids


def threads(pid: int) -> dict[str, list]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = [comm, int(fields[11]) + int(fields[12])]
    return out


with open(sys.argv[1], "w") as log:
    while True:
        for pid in servers():
            try:
                log.write(json.dumps({"t": time.time(), "pid": pid, "threads": threads(pid)}) + "\n")
            except OSError:
                pass
        log.flush()
        time.sleep(0.25)
