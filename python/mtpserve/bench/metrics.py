"""Benchmark metrics: pure arithmetic over per-request records, defined as vLLM's bench_serving defines them.

Times are seconds on one monotonic clock (time.perf_counter); reported latencies are milliseconds.

- TTFT: first chunk carrying text - request start.
- E2E latency: the chunk that carried the finish reason (else the last chunk carrying text) - request start,
  as vLLM's last chunk with choices; the usage-only chunk and [DONE] that follow are not counted. A request whose
  tokens carried no text at all (EOS first) takes the finishing chunk as its first token too.
- TPOT (excl. 1st token): (E2E latency - TTFT) / (output tokens - 1), for requests with more than one output
  token; output tokens are the server's usage.completion_tokens when it sends usage.
- ITL: the gap between consecutive text chunks, recorded once per chunk, as vLLM does. A chunk may carry several
  tokens (an MTP step emits 1 + accepted drafts tokens at once, and the detokenizer may hold back an incomplete
  character), so with speculative decoding ITL is an inter-*chunk* latency and its mean exceeds TPOT; TPOT is the
  per-token figure. ``mean_tokens_per_chunk`` says how many tokens a chunk carried on average.
- Throughputs divide by the benchmark duration (first dispatch to last completion); input tokens are the
  server's usage.prompt_tokens when given (it includes BOS and any chat template), else the dataset's count.
- Goodput: requests that succeeded and met every given SLO (ttft, tpot, e2el in ms), per second; a request with
  one output token has TPOT 0 there, as in vLLM.
- Percentiles use numpy's default (linear interpolation); statistics of an empty set are None.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from mtpserve.outputs import acceptance_rate, mean_acceptance_length

GOODPUT_KEYS = ("ttft", "tpot", "e2el")
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass
class RequestRecord:
    index: int
    prompt_len: int  # the dataset's count (tokens of the prompt text, no special tokens)
    expected_output_len: int  # max_tokens sent
    start: float = 0.0
    chunk_times: list[float] = field(default_factory=list)  # arrival of every chunk that carried text
    finish_time: float | None = None  # arrival of the chunk with the finish reason
    end: float | None = None  # when the response stream closed
    success: bool = False
    error: str = ""
    generated_text: str = ""
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    counted_output_tokens: int | None = None  # our tokenizer's count of generated_text, used without usage
    finish_reason: str | None = None
    source_id: str | None = None

    @property
    def output_tokens(self) -> int:
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens
        return self.counted_output_tokens or 0

    @property
    def input_tokens(self) -> int:
        return self.usage_prompt_tokens if self.usage_prompt_tokens is not None else self.prompt_len

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.start if self.chunk_times else None

    @property
    def latency(self) -> float | None:
        if not self.chunk_times:
            return None
        end = self.chunk_times[-1] if self.finish_time is None else max(self.finish_time, self.chunk_times[-1])
        return end - self.start

    @property
    def itl(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in zip(t, t[1:])]

    @property
    def tpot(self) -> float | None:
        n = self.output_tokens
        if not self.chunk_times or n <= 1:
            return None
        return (self.latency - self.ttft) / (n - 1)

    def to_dict(self, time_origin: float = 0.0) -> dict:
        """JSON-ready: times in seconds from ``time_origin``, plus the derived per-request metrics in ms."""
        d = asdict(self)
        d["start"] = self.start - time_origin
        d["end"] = None if self.end is None else self.end - time_origin
        d["finish_time"] = None if self.finish_time is None else self.finish_time - time_origin
        d["chunk_times"] = [t - time_origin for t in self.chunk_times]
        d["output_tokens"] = self.output_tokens
        d["input_tokens"] = self.input_tokens
        for name in ("ttft", "tpot", "latency"):
            v = getattr(self, name)
            d[f"{name}_ms"] = None if v is None else v * 1000
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RequestRecord":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def percentile(values, p: float) -> float | None:
    return float(np.percentile(values, p)) if len(values) else None


def summarize_ms(values_s, percentiles=(90, 99)) -> dict:
    """mean, median, std and the given percentiles of values in seconds, as milliseconds (None when empty)."""
    v = np.asarray(values_s, dtype=np.float64) * 1000
    empty = v.size == 0
    out = {"mean": None if empty else float(v.mean()), "median": None if empty else float(np.median(v)),
           "std": None if empty else float(v.std())}
    for p in percentiles:
        out[f"p{_pct_name(p)}"] = percentile(v, p)
    return out


def _pct_name(p: float) -> str:
    return str(int(p)) if float(p).is_integer() else str(p)


def parse_goodput(specs) -> dict[str, float]:
    """["ttft:500", "tpot:50"] (ms) -> {"ttft": 500.0, "tpot": 50.0}."""
    slos: dict[str, float] = {}
    for spec in specs or []:
        for item in str(spec).replace(",", " ").split():
            key, sep, value = item.partition(":")
            if not sep or key not in GOODPUT_KEYS:
                raise ValueError(f"--goodput takes KEY:MS with KEY one of {', '.join(GOODPUT_KEYS)}; got {item!r}")
            try:
                ms = float(value)
            except ValueError:
                raise ValueError(f"--goodput {item!r}: {value!r} is not a number of milliseconds") from None
            if not ms >= 0 or math.isinf(ms):
                raise ValueError(f"--goodput {item!r}: the SLO must be a finite number >= 0")
            slos[key] = ms
    return slos


def meets_slos(record: RequestRecord, slos: dict[str, float]) -> bool:
    if not record.success:
        return False
    values = {"ttft": record.ttft, "tpot": record.tpot or 0.0, "e2el": record.latency}
    return all(values[key] is not None and values[key] * 1000 <= ms for key, ms in slos.items())


@dataclass
class BenchmarkMetrics:
    completed: int
    failed: int
    duration_s: float
    total_input: int
    total_output: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    request_goodput: float | None
    good_requests: int | None
    num_chunks: int
    mean_tokens_per_chunk: float | None
    latency: dict[str, dict]  # ttft / tpot / itl / e2el -> summarize_ms
    percentiles: tuple = (90, 99)

    def to_dict(self) -> dict:
        """Flat, with vLLM's result-file key names (mean_ttft_ms, p99_itl_ms...)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("latency", "percentiles")}
        for metric, stats in self.latency.items():
            for stat, value in stats.items():
                d[f"{stat}_{metric}_ms"] = value
        return d


def calculate_metrics(records: list[RequestRecord], duration_s: float, goodput: dict[str, float] | None = None,
                      percentiles=(90, 99)) -> BenchmarkMetrics:
    if duration_s <= 0:
        raise ValueError(f"duration must be positive, got {duration_s}")
    ok = [r for r in records if r.success]
    total_input = sum(r.input_tokens for r in ok)
    total_output = sum(r.output_tokens for r in ok)
    samples = {
        "ttft": [r.ttft for r in ok],
        "tpot": [r.tpot for r in ok if r.tpot is not None],
        "itl": [gap for r in ok for gap in r.itl],
        "e2el": [r.latency for r in ok],
    }
    num_chunks = sum(len(r.chunk_times) for r in ok)
    good = None if not goodput else sum(meets_slos(r, goodput) for r in records)
    return BenchmarkMetrics(
        completed=len(ok), failed=len(records) - len(ok), duration_s=duration_s,
        total_input=total_input, total_output=total_output,
        request_throughput=len(ok) / duration_s, output_throughput=total_output / duration_s,
        total_token_throughput=(total_input + total_output) / duration_s,
        request_goodput=None if good is None else good / duration_s, good_requests=good,
        num_chunks=num_chunks, mean_tokens_per_chunk=total_output / num_chunks if num_chunks else None,
        latency={name: summarize_ms(v, percentiles) for name, v in samples.items()},
        percentiles=tuple(percentiles))


# ---- speculative decoding counters from the server's /metrics ------------------------------------------------

SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
SPEC_PREFIXES = ("mtpserve:", "vllm:")
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_prometheus_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Prometheus text exposition -> [(sample name, labels, value)], by prometheus_client's parser when it is
    installed, else by a small parser of the same format."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        samples = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = _SAMPLE.match(line)
            if m is None:
                continue
            try:
                value = float(m.group(3))
            except ValueError:
                continue
            samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), value))
        return samples
    return [(s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text) for s in family.samples]


def parse_prometheus_text(text: str) -> dict[str, float]:
    """{sample name: value summed over its label sets}; samples with a ``position`` or ``le`` label are also kept
    one by one as ``'name{position="i"}'`` / ``'name{le="k"}'`` (the per-draft-position acceptance counter, the
    buckets of the per-step k histogram)."""
    totals: dict[str, float] = {}
    for name, labels, value in parse_prometheus_samples(text):
        totals[name] = totals.get(name, 0.0) + value
        for label in ("position", "le"):
            if label in labels:
                key = f'{name}{{{label}="{labels[label]}"}}'
                totals[key] = totals.get(key, 0.0) + value
    return totals


def _counter(snapshot: dict[str, float], prefix: str, name: str, suffix: str = "") -> float | None:
    for key in (f"{prefix}spec_decode_{name}_total{suffix}", f"{prefix}spec_decode_{name}{suffix}"):
        if key in snapshot:
            return snapshot[key]
    return None


def _steps_by_k(before: dict[str, float], after: dict[str, float], prefix: str) -> list[int] | None:
    """Decode steps at each k over the run, from the cumulative buckets of the per-step k histogram."""
    cumulative = []
    while True:
        key = f'{prefix}spec_decode_step_k_bucket{{le="{len(cumulative)}.0"}}'
        if key not in after:
            break
        cumulative.append(after[key] - before.get(key, 0.0))
    if not cumulative:
        return None
    return [int(c - (cumulative[k - 1] if k else 0)) for k, c in enumerate(cumulative)]


# The adaptive policy's counters (mtpserve only): the key each delta is reported under, and its type.
POLICY_COUNTERS = {"num_retired_sequences": ("retired_sequences", int),
                   "num_fill_skipped_steps": ("fill_skipped_steps", int),
                   "draft_seconds": ("draft_seconds", float)}


def _policy_counters(before: dict[str, float], after: dict[str, float], prefix: str) -> dict:
    out = {}
    for name, (key, kind) in POLICY_COUNTERS.items():
        a, b = _counter(before, prefix, name), _counter(after, prefix, name)
        out[key] = None if a is None or b is None else kind(b - a)
    return out


def engine_busy(before: dict[str, float] | None, after: dict[str, float] | None, duration_s: float) -> dict | None:
    """The share of the run the server's engine spent in steps ("busy"), and in steps that computed prompt tokens
    ("prompt_steps"), from mtpserve's engine_step_seconds counters: near 1, the engine bounds the numbers; well
    below, the requests waited elsewhere (the frontend, the client). Where the server counts them, also the steps
    run ("steps") and their mean milliseconds: whole ("step_ms"), in the target forward ("target_ms"), from its
    launch to the tokens ("sample_ms"), in MTP drafting's host work before its launch ("draft_host_ms") and in the
    speculation policy's plan ("plan_ms": a part of that, or beside the target forward); what a slower engine spends
    its extra time on. Where it counts them, also how busy its HTTP event loop was on a CPU ("frontend_busy"; near 1,
    the frontend bounds the run) and how many requests the engine preempted to recompute later ("preemptions": work
    done twice), and its own mean TTFT, TPOT and E2E latency of the run's requests ("server_ttft_ms",
    "server_tpot_ms", "server_e2el_ms"; from its histograms, which start at a request's arrival at its engine
    frontend: the client's figure less the server's is the time spent in HTTP handling, tokenizing and the network).
    None where the server has no step counters."""
    if before is None or after is None or duration_s <= 0:
        return None
    deltas = {}
    for key, name in (("busy", "engine_step_seconds"), ("prompt_steps", "engine_prompt_step_seconds"),
                      ("steps", "engine_steps"), ("target", "engine_target_seconds"),
                      ("sample", "engine_sample_seconds"), ("draft_host", "engine_draft_host_seconds"),
                      ("plan", "engine_plan_seconds"), ("frontend", "frontend_loop_cpu_seconds"),
                      ("preemptions", "num_preemptions")):
        a, b = before.get(f"mtpserve:{name}_total"), after.get(f"mtpserve:{name}_total")
        deltas[key] = None if a is None or b is None else b - a
    if deltas["busy"] is None or deltas["prompt_steps"] is None:
        return None
    shares = {"busy": deltas["busy"] / duration_s, "prompt_steps": deltas["prompt_steps"] / duration_s}
    if deltas["frontend"] is not None:
        shares["frontend_busy"] = deltas["frontend"] / duration_s
    if deltas["preemptions"] is not None:
        shares["preemptions"] = int(deltas["preemptions"])
    shares.update(_server_latency(before, after))
    steps = deltas["steps"]
    if steps:
        shares["steps"] = int(steps)
        for key, name in (("busy", "step_ms"), ("target", "target_ms"), ("sample", "sample_ms"),
                          ("draft_host", "draft_host_ms"), ("plan", "plan_ms")):
            shares[name] = None if deltas[key] is None else 1e3 * deltas[key] / steps
    return shares


def _server_latency(before: dict[str, float], after: dict[str, float]) -> dict:
    """Mean milliseconds of the requests that ended over the run, by the server's latency histograms."""
    out = {}
    for key, name in (("ttft", "time_to_first_token_seconds"), ("tpot", "time_per_output_token_seconds"),
                      ("e2el", "e2e_request_latency_seconds")):
        sums, counts = (after.get(f"mtpserve:{name}_{part}", 0.0) - before.get(f"mtpserve:{name}_{part}", 0.0)
                        for part in ("sum", "count"))
        if f"mtpserve:{name}_count" in after and counts > 0:
            out[f"server_{key}_ms"] = 1e3 * sums / counts
    return out


def spec_decode_stats(before: dict[str, float] | None, after: dict[str, float] | None) -> dict | None:
    """Counter deltas over the run, acceptance rate = Δaccepted / Δdraft tokens and mean acceptance length =
    1 + Δaccepted / Δdrafts (tokens per verification step), the acceptance rate of each draft position
    (Δaccepted at that position / Δdrafts), and where the server counts them the sequences retired from drafting,
    the steps that skipped the MTP fill and the MTP layer's device seconds. None when the server exposes no such
    counters; a rate whose denominator did not move (no drafts, e.g. MTP off) is None."""
    if before is None or after is None:
        return None
    for prefix in SPEC_PREFIXES:
        delta = {}
        for name in SPEC_COUNTERS:
            a, b = _counter(before, prefix, name), _counter(after, prefix, name)
            delta[name] = None if a is None or b is None else b - a
        if delta["num_draft_tokens"] is None or delta["num_accepted_tokens"] is None:
            continue
        dt, acc, drafts = delta["num_draft_tokens"], delta["num_accepted_tokens"], delta["num_drafts"]
        per_position = []
        while drafts:
            suffix = f'{{position="{len(per_position)}"}}'
            a = _counter(before, prefix, "num_accepted_tokens_per_pos", suffix)
            b = _counter(after, prefix, "num_accepted_tokens_per_pos", suffix)
            if a is None or b is None:
                break
            per_position.append((b - a) / drafts)
        return {"source": prefix.rstrip(":"), **delta, **_policy_counters(before, after, prefix),
                "acceptance_rate": acceptance_rate(acc, dt),
                "mean_acceptance_length": mean_acceptance_length(acc, drafts),
                "acceptance_rate_per_position": per_position,
                "steps_by_k": _steps_by_k(before, after, prefix)}
    return None
