"""Prints how many established connections to local PORT each child process of PID holds: which API server the
kernel handed the client's connections to (multiprocessing's resource tracker, a child too, holds
none). Usage: python3 spread.py PID PORT"""
import os
import sys


def children(pid: int) -> list[int]:
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{entry}/stat").read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def established(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in list(open(table))[1:]:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "01":
                inodes.add(f[9])
    return inodes


def held(pid: int, inodes: set[str]) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] in inodes
        except OSError:
            pass
    return n


pid, port = int(sys.argv[1]), int(sys.argv[2])
inodes = established(port)
print(" ".join(str(held(child, inodes)) for child in sorted(children(pid))))
