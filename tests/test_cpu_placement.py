"""The benchmark's CPU placement: splitting the host's physical cores between client and server, and finding where
a process's busy threads ran."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mtpserve.bench import cpu_placement as placement

CPUS = os.sched_getaffinity(0)
CORES = placement.physical_cores(CPUS)


def test_physical_cores_cover_the_cpus_once():
    assert sorted(cpu for core in CORES for cpu in core) == sorted(CPUS)


@pytest.mark.skipif(len(CORES) < 2, reason="needs two physical cores")
def test_the_client_gets_whole_cores_and_the_server_the_rest():
    client, server = placement.split_cores(1)
    assert client | server == CPUS and not client & server
    assert sorted(client) == CORES[-1]


@pytest.mark.parametrize("client_cores", [0, len(CORES)])
def test_a_split_that_leaves_either_side_without_a_core_is_refused(client_cores):
    with pytest.raises(ValueError, match=f"physical cores.*got {client_cores}"):
        placement.split_cores(client_cores)


def test_compact_writes_ranges_as_taskset_does():
    assert placement.compact({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert placement.compact(set()) == ""


def test_the_busiest_thread_is_the_one_that_spun_and_ran_on_an_allowed_cpu():
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    before, started = placement.thread_times(os.getpid()), time.monotonic()
    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.5)
    after = placement.thread_times(os.getpid())
    stop.set()
    spinner.join()
    busiest = placement.busy_threads(before, after, time.monotonic() - started)
    name, share, cpu = busiest[0]
    assert share > 0.2 and cpu in CPUS
    assert name != "main"  # the main thread slept


def test_the_sweep_starts_its_server_on_the_given_cpus(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import bench_mtp_sweep

    cpu = min(CPUS)
    proc, _ = bench_mtp_sweep.start_server([sys.executable, "-c", "import time; time.sleep(60)"], None, 0, "fixed",
                                           0, [], tmp_path / "server.log", cpus={cpu})
    try:
        assert os.sched_getaffinity(proc.pid) == {cpu}
    finally:
        bench_mtp_sweep.stop_server(proc, timeout_s=5)


def test_the_machines_cpu_time_only_grows_and_its_stolen_share_is_a_share():
    before = placement.machine_times()
    time.sleep(0.3)
    after = placement.machine_times()
    assert len(before) >= 8 and all(a >= b for a, b in zip(after, before))
    share = placement.stolen_share(before, after)
    assert share is None or 0.0 <= share <= 1.0


def test_the_stolen_share_counts_steal_over_every_kind_but_guest_time():
    before = [100, 0, 20, 500, 0, 0, 0, 10, 40, 0]
    # 60 user, 10 system, 120 idle, 10 steal; the 30 guest ticks are inside user already
    after = [160, 0, 30, 620, 0, 0, 0, 20, 70, 0]
    assert placement.stolen_share(before, after) == 10 / 200
    assert placement.stolen_share(before, before) is None
