"""Each repeat of a bench_mtp_sweep.py run: the client's mean TTFT / TPOT / E2E against the server's own, the
requests waiting for their first chunk and those decoding (mean counts over the repeat, from raw/'s chunk times),
and the engine's steps.  python3 server_latency.py <out-dir>/sweep.json"""
import glob
import json
import os
import sys

sweep = json.load(open(sys.argv[1]))
raw = os.path.join(os.path.dirname(sys.argv[1]), 'raw')
print('method | repeat | client TTFT | server TTFT | client TPOT | server TPOT | client E2E | server E2E | '
      'waiting | decoding | steps | step ms')
for path in sorted(glob.glob(f'{raw}/*.json')):
    res = json.load(open(path))
    e, m = res['engine'], res['metrics']
    recs = [r for r in res['records'] if r['success'] and r['chunk_times']]
    dur = m['duration_s']
    waiting = sum(r['chunk_times'][0] - r['start'] for r in recs) / dur
    decoding = sum(r['chunk_times'][-1] - r['chunk_times'][0] for r in recs) / dur
    tag = os.path.basename(path).removesuffix('.json')
    print(f"{tag} | {m['mean_ttft_ms']:.1f} | {e['server_ttft_ms']:.1f} | {m['mean_tpot_ms']:.3f} | "
          f"{e['server_tpot_ms']:.3f} | {m['mean_e2el_ms']:.1f} | {e['server_e2el_ms']:.1f} | {waiting:.1f} | "
          f"{decoding:.1f} | {e['steps']} | {e['step_ms']:.3f}")
