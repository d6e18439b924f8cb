"""Per run of call.sh: the client's mean TTFT / TPOT / E2E (ms) against the server's own (its /metrics histograms,
before and after the timed run), tokens per chunk, and how many requests were waiting for their first token and
how many were decoding, on average over the run (from every request's chunk times).
  python3 analyse.py <dir with <method>_<round>.json and metrics_{before,after}_<method>_<round>.txt>"""
import glob
import json
import os
import re
import sys


def histogram(path, name):
    """(sum, count) of mtpserve:<name> in a /metrics text."""
    text = open(path).read()
    total = float(re.search(rf'^mtpserve:{name}_sum{{[^}}]*}} (\S+)', text, re.M).group(1))
    count = float(re.search(rf'^mtpserve:{name}_count{{[^}}]*}} (\S+)', text, re.M).group(1))
    return total, count


def server_mean_ms(d, tag, name):
    (s0, c0), (s1, c1) = (histogram(f'{d}/metrics_{w}_{tag}.txt', name) for w in ('before', 'after'))
    return 1e3 * (s1 - s0) / (c1 - c0)


def occupancy(records, duration):
    """Mean number of requests waiting for their first chunk, and between it and their last, over the run."""
    waiting = sum(r['chunk_times'][0] - r['start'] for r in records)
    decoding = sum(r['chunk_times'][-1] - r['chunk_times'][0] for r in records)
    return waiting / duration, decoding / duration


d = sys.argv[1]
print('run | client TTFT | server TTFT | client TPOT | server TPOT | client E2E | server E2E | tokens/chunk | '
      'chunks in first 50 ms | waiting | decoding | duration s | engine steps | step ms')
for path in sorted(glob.glob(f'{d}/*_[0-9].json')):
    tag = os.path.basename(path).removesuffix('.json')
    res = json.load(open(path))
    recs = [r for r in res['records'] if r['success'] and r['chunk_times']]
    m, eng = res['metrics'], res.get('engine') or {}
    dur = m['duration_s'] if 'duration_s' in m else m['duration']
    mean = lambda k: sum(r[k] for r in recs) / len(recs)
    chunks = sum(len(r['chunk_times']) for r in recs)
    early = sum(sum(t - r['chunk_times'][0] < 0.05 for t in r['chunk_times']) for r in recs) / len(recs)
    wait, dec = occupancy(recs, dur)
    print(f"{tag} | {mean('ttft_ms'):.1f} | {server_mean_ms(d, tag, 'time_to_first_token_seconds'):.1f} | "
          f"{mean('tpot_ms'):.3f} | {server_mean_ms(d, tag, 'time_per_output_token_seconds'):.3f} | "
          f"{mean('latency_ms'):.1f} | {server_mean_ms(d, tag, 'e2e_request_latency_seconds'):.1f} | "
          f"{sum(r['output_tokens'] for r in recs) / chunks:.2f} | {early:.1f} | {wait:.1f} | {dec:.1f} | "
          f"{dur:.2f} | {eng.get('steps')} | {eng.get('step_ms') or 0:.3f}")
