"""The printed summary, in the layout of vLLM's bench_serving (40-column labels, 50-column rules)."""
from __future__ import annotations

import math

from mtpserve.bench.metrics import BenchmarkMetrics

WIDTH = 50
SECTIONS = (("ttft", "TTFT", "Time to First Token"), ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
            ("itl", "ITL", "Inter-token Latency"), ("e2el", "E2EL", "End-to-end Latency"))


def _rule(title: str = "", fill: str = "=") -> str:
    return f"{title:{fill}^{WIDTH}}"


def _line(label: str, value, fmt: str = ".2f") -> str:
    if value is None:
        text = "N/A"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, int):
        text = str(value)
    else:
        text = format(value, fmt)
    return f"{label:<40} {text:<10}"


def _stat_label(stat: str) -> str:
    return {"mean": "Mean", "median": "Median"}.get(stat, stat.upper() if stat.startswith("p") else stat.title())


def format_summary(metrics: BenchmarkMetrics, spec_decode: dict | None, max_concurrency: int | None = None,
                   request_rate: float | None = None, client_cpu_busy: float | None = None,
                   engine: dict | None = None) -> str:
    m = metrics
    lines = [_rule(" Serving Benchmark Result "),
             _line("Successful requests:", m.completed),
             _line("Failed requests:", m.failed)]
    if max_concurrency is not None:
        lines.append(_line("Maximum request concurrency:", max_concurrency))
    if request_rate is not None:
        lines.append(_line("Request rate configured (RPS):", "inf" if math.isinf(request_rate) else request_rate))
    lines += [_line("Benchmark duration (s):", m.duration_s),
              _line("Total input tokens:", m.total_input),
              _line("Total generated tokens:", m.total_output),
              _line("Request throughput (req/s):", m.request_throughput)]
    if m.request_goodput is not None:
        lines.append(_line("Request goodput (req/s):", m.request_goodput))
    lines += [_line("Output token throughput (tok/s):", m.output_throughput),
              _line("Total Token throughput (tok/s):", m.total_token_throughput)]
    for key, short, title in SECTIONS:
        lines.append(_rule(title, "-"))
        for stat, value in m.latency[key].items():
            if stat != "std":
                lines.append(_line(f"{_stat_label(stat)} {short} (ms):", value))
    lines.append(_rule("Speculative decoding", "-"))
    s = spec_decode or {}
    rate = s.get("acceptance_rate")
    lines += [_line("Acceptance rate (%):", None if rate is None else rate * 100),
              _line("Mean acceptance length:", s.get("mean_acceptance_length")),
              _line("Drafts:", _count(s.get("num_drafts"))),
              _line("Draft tokens:", _count(s.get("num_draft_tokens"))),
              _line("Accepted tokens:", _count(s.get("num_accepted_tokens")))]
    if s.get("acceptance_rate_per_position"):
        lines.append(_line("Per-position acceptance (%):",
                           ", ".join(f"{100 * r:.2f}" for r in s["acceptance_rate_per_position"])))
    lines.append(_line("Mean tokens per chunk:", m.mean_tokens_per_chunk))
    if client_cpu_busy is not None:
        lines.append(_line("Client CPU busy (%):", 100 * client_cpu_busy))
    if engine is not None:
        if engine.get("frontend_busy") is not None:
            lines.append(_line("Server event loop busy (%):", 100 * engine["frontend_busy"]))
        lines += [_line("Engine busy (%):", 100 * engine["busy"]),
                  _line("Engine in prompt steps (%):", 100 * engine["prompt_steps"])]
        if engine.get("preemptions") is not None:
            lines.append(_line("Engine preemptions:", engine["preemptions"]))
        for key, short in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2el", "E2EL")):
            if engine.get(f"server_{key}_ms") is not None:
                lines.append(_line(f"Server's own mean {short} (ms):", engine[f"server_{key}_ms"]))
        if engine.get("steps"):
            lines += [_line("Engine steps:", engine["steps"]), _line("Engine ms per step:", engine["step_ms"], ".3f"),
                      _line("  in the target forward:", engine["target_ms"], ".3f"),
                      _line("  launch to tokens:", engine["sample_ms"], ".3f")]
            if s.get("draft_seconds") is not None:
                lines.append(_line("  in MTP drafting:", 1e3 * s["draft_seconds"] / engine["steps"], ".3f"))
    lines.append(_rule())
    return "\n".join(lines)


def _count(value):
    return None if value is None else int(round(value))


def format_report(result) -> str:
    """Summary of a runner.BenchResult."""
    return format_summary(result.metrics, result.spec_decode, result.config.max_concurrency,
                          result.config.request_rate, result.client_cpu_busy, result.engine)
