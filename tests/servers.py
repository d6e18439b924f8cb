"""Starting `mtpserve serve` processes in tests and waiting, boundedly, until they answer."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from mtpserve.client import MtpserveError


def start_serve(*flags: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtpserve.cli", "serve", *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def wait_until_healthy(client, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Polls client.health() until it says yes; fails if the process dies or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if client.health():
                return
        except MtpserveError:
            pass
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "server did not come up"
        time.sleep(0.1)
