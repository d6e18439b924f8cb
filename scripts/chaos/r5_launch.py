#!/usr/bin/env python3
"""R5 on a real group: `mtpserve launch --nnodes 2` (HTTP + gRPC, key and cluster token from the
environment, --log_level=debug): which addresses its processes listen on, and whether the secrets
show in any command line or log. Run from the repository root; loopback only."""
import os, signal, subprocess, sys, time, json
from pathlib import Path
import httpx
sys.path.insert(0, "scripts/chaos")
import chaos
from mtpserve.launch import free_port_pair
port, master = chaos.free_port(), free_port_pair()
log = open("/tmp/r5-launch.log", "w")
env = {**os.environ, "PYTHONUNBUFFERED": "1", "MTPSERVE_API_KEY": "k-secret-123", "MTPSERVE_CLUSTER_TOKEN": "t-secret-456"}
p = subprocess.Popen([sys.executable, "-m", "mtpserve.cli", "launch", "--nnodes=2", f"--port={port}", "--grpc_port=%d" % chaos.free_port(),
                      f"--master_node_addr=127.0.0.1:{master}", "--log_level=debug"], stdout=log, stderr=subprocess.STDOUT, env=env)
deadline = time.time() + 300
while True:
    try:
        if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200: break
    except httpx.HTTPError: pass
    assert time.time() < deadline and p.poll() is None
    time.sleep(0.3)
httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"prompt": "hi", "max_tokens": 4}, headers={"Authorization": "Bearer k-secret-123"}, timeout=60)
pids = [int(l.split("pid ")[1]) for l in Path("/tmp/r5-launch.log").read_text().splitlines() if "mtpserve.launch: rank" in l][:2]
listening = chaos.listening_sockets(pids + [p.pid])
cmdlines = [Path(f"/proc/{x}/cmdline").read_bytes().replace(b"\0", b" ").decode() for x in pids + [p.pid]]
p.send_signal(signal.SIGTERM); code = p.wait(60)
text = Path("/tmp/r5-launch.log").read_text()
print(json.dumps({"listening": listening, "secrets_in_cmdlines": any("secret" in c for c in cmdlines),
                  "secrets_in_debug_log": "secret" in text, "launch_exit": code, "master": master, "port": port}, indent=1))
