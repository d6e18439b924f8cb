"""The `mtpserve` command. Flags follow xLLM's spelling: --flag=value or --flag value, booleans true/false."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from mtpserve.bench.runner import add_bench_args
from mtpserve.devices import rank_device
from mtpserve.engine_args import SPECULATIVE_POLICIES, EngineArgs


def parse_bool(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    defaults = EngineArgs.__dataclass_fields__
    parser.add_argument("--model", default=None, help="HF DeepSeek-V3 directory (default: the embedded tiny model)")
    for name, kind in (("devices", str), ("dtype", str), ("block_size", int), ("max_memory_utilization", float),
                       ("max_cache_blocks", int), ("max_tokens_per_batch", int), ("max_seqs_per_batch", int),
                       ("enable_prefix_cache", parse_bool), ("enable_chunked_prefill", parse_bool),
                       ("max_model_len", int), ("draft_model", str), ("draft_devices", str),
                       ("num_speculative_tokens", int), ("seed", int),
                       ("graph_max_batch", int), ("ep_size", int), ("dp_size", int)):
        parser.add_argument(f"--{name}", type=kind, default=defaults[name].default)
    parser.add_argument("--speculative_policy", choices=SPECULATIVE_POLICIES,
                        default=defaults["speculative_policy"].default,
                        help="adaptive: each step drafts the k in 0..num_speculative_tokens that minimises the expected "
                             "mean time per output token of the running requests, from measured step costs and "
                             "acceptance; fixed: always num_speculative_tokens")
    parser.add_argument("--deferred_fill_positions", type=int, default=defaults["deferred_fill_positions"].default,
                        help="adaptive policy on one rank: a sequence given no drafts skips the MTP layer's cache fill "
                             "for up to this many positions and catches up when it drafts again (0: fill every "
                             "step); default 64 on the CPU and 0 on GPUs and NPUs (on a GPU it slowed greedy decoding; it "
                             "has not run on an NPU)")
    parser.add_argument("--plan_ahead", type=parse_bool, default=defaults["plan_ahead"].default,
                        help="adaptive policy: plan each step's drafts while its target forward runs, not after it "
                             "(the plan then lacks that step's verifications); default true on GPUs and NPUs, "
                             "whose forwards run asynchronously, and false on the CPU, where nothing is hidden")
    parser.add_argument("--batch_invariant", type=parse_bool, nargs="?", const=True,
                        default=defaults["batch_invariant"].default,
                        help="batch-invariant kernels: each token's result is bit-identical whatever else runs in "
                             "its step, so greedy MTP output equals no-MTP output and a seeded request repeats "
                             "under any load, in bf16 too (CPU and CUDA; costs throughput, see docs/benchmarks.md)")
    parser.add_argument("--enable_graph", type=parse_bool, default=defaults["enable_graph"].default,
                        help="replay CUDA graphs, captured at start-up, for decode steps of up to --graph_max_batch "
                             "sequences (GPUs only; false runs every step eagerly)")
    parser.add_argument("--enable_prefill_graph", type=parse_bool, default=defaults["enable_prefill_graph"].default,
                        help="with --enable_graph, steps with prompt tokens (their target forward and MTP fill) "
                             "replay CUDA graphs too, one per padded row count up to --max_tokens_per_batch, captured "
                             "at start-up (one rank; false runs them eagerly and starts sooner)")


def engine_kwargs(ns: argparse.Namespace) -> dict:
    return {f.name: getattr(ns, f.name) for f in dataclasses.fields(EngineArgs) if f.init}


def engine_args(ns: argparse.Namespace) -> EngineArgs:
    return EngineArgs(**engine_kwargs(ns))


def rank_engine_args(ns: argparse.Namespace, node_rank: int) -> EngineArgs:
    """Rank node_rank's EngineArgs: its own device where --devices (--draft_devices) lists one per rank."""
    draft = ns.draft_devices and rank_device(ns.draft_devices, node_rank, ns.nnodes)
    return engine_args(argparse.Namespace(**{**vars(ns), "devices": rank_device(ns.devices, node_rank, ns.nnodes),
                                             "draft_devices": draft}))


def cmd_generate(ns: argparse.Namespace) -> int:
    from mtpserve.llm import LLM
    from mtpserve.sampling_params import SamplingParams

    llm = LLM(**engine_kwargs(ns))
    params = SamplingParams(max_tokens=ns.max_tokens, temperature=ns.temperature, top_p=ns.top_p, top_k=ns.top_k,
                            seed=ns.sampling_seed)
    try:
        if ns.chat:
            outputs = llm.chat([[{"role": "user", "content": p}] for p in ns.prompt], params)
        else:
            outputs = llm.generate(ns.prompt, params)
        for out in outputs:
            completion = out.outputs[0]
            print(f"=== {out.prompt if out.prompt is not None else ns.prompt[int(out.request_id)]!r}")
            print(completion.text)
            m = out.metrics
            print(f"--- {len(completion.token_ids)} tokens, finish_reason={completion.finish_reason}"
                  + (f", acceptance_rate={m.acceptance_rate:.3f}" if m.acceptance_rate is not None else ""))
    finally:
        llm.shutdown()
    return 0


def cmd_export_mtp(ns: argparse.Namespace) -> int:
    from mtpserve.export_mtp import export_mtp

    result = export_mtp(ns.input_dir, ns.output_dir, force=ns.force)
    print(f"exported MTP layer model.layers.{result.layer} ({len(result.tensors)} tensors, "
          f"{result.total_size / 2**20:.1f} MiB) to {result.output_dir}; use it with --draft_model {result.output_dir}")
    return 0


def check_serve_flags(ns: argparse.Namespace) -> None:
    """What this build of `mtpserve serve` can run: nnodes ranks in dp_size attention groups (tensor parallel
    inside each), the routed experts optionally expert-parallel over all ranks, MLA."""
    from mtpserve.distributed import check_parallel_sizes, parse_master_addr

    if ns.nnodes < 1:
        raise ValueError(f"--nnodes must be >= 1, got {ns.nnodes}")
    if not 0 <= ns.node_rank < ns.nnodes:
        raise ValueError(f"--node_rank={ns.node_rank} needs --nnodes > {ns.node_rank}, but --nnodes={ns.nnodes}")
    if ns.nnodes > 1:
        host, _ = parse_master_addr(ns.master_node_addr)
        if ns.dp_size > 1 and ":" in host:
            # group_link.py's connections (multiprocessing.connection) open IPv4 sockets only.
            raise ValueError(f"--dp_size {ns.dp_size} needs an IPv4 or host-name --master_node_addr, got "
                             f"{ns.master_node_addr!r}: the links between attention groups are IPv4 only")
    check_parallel_sizes(ns.nnodes, ns.ep_size, ns.dp_size)
    if not ns.enable_mla:
        raise ValueError("--enable_mla=false: DeepSeek-V3 models use MLA attention, so --enable_mla must be true")
    if not 0 <= ns.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {ns.port}")
    if not 0 <= ns.grpc_port <= 65535:
        raise ValueError(f"--grpc_port must be in 0..65535 (0: no gRPC API), got {ns.grpc_port}")
    if ns.grpc_port and ns.grpc_port == ns.port:
        raise ValueError(f"--grpc_port={ns.grpc_port} must differ from --port")
    if ns.api_server_count < 1:
        raise ValueError(f"--api_server_count must be >= 1, got {ns.api_server_count}")
    if ns.api_server_count > 1 and ns.nnodes > 1:
        raise ValueError(f"--api_server_count {ns.api_server_count} needs --nnodes 1: several API servers before a "
                         f"group of {ns.nnodes} ranks are not supported")


def check_layout_fits_model(ns: argparse.Namespace, model_path) -> None:
    """Refuses, before any rank loads anything, a layout the model cannot be split into."""
    from mtpserve.config import load_config

    config = load_config(model_path)
    if ns.ep_size > 1 and config.n_routed_experts % ns.ep_size:
        raise ValueError(f"--ep_size={ns.ep_size} does not divide the model's {config.n_routed_experts} routed "
                         "experts; choose --ep_size 1 or --nnodes among their divisors")
    # What tensor parallelism splits over the ranks of an attention group.
    split = {"attention heads": config.num_attention_heads, "vocabulary entries": config.vocab_size,
             "dense MLP intermediate size": config.intermediate_size if config.first_k_dense_replace else 0,
             "shared experts' intermediate size": config.moe_intermediate_size * config.n_shared_experts,
             "routed experts' intermediate size": config.moe_intermediate_size if ns.ep_size == 1 else 0}
    group = ns.nnodes // ns.dp_size
    for what, n in split.items():
        if n % group:
            raise ValueError(f"--nnodes {ns.nnodes} with --dp_size {ns.dp_size} makes attention groups of {group} "
                             f"ranks: {group} does not divide the model's {n} {what}; choose --nnodes / --dp_size "
                             "among its divisors")


def read_secret(flag_value: str | None, file_path: str | None, env: str, what: str) -> str | None:
    """A secret from --flag, --flag_file or $env (first set wins); a file's surrounding whitespace is
    dropped. The file and environment forms keep it out of /proc/PID/cmdline."""
    if flag_value:
        return flag_value
    if file_path:
        try:
            with open(file_path, encoding="utf-8") as f:
                value = f.read().strip()
        except OSError as e:
            raise ValueError(f"cannot read the {what} file {file_path!r}: {e.strerror or e}") from None
        if not value:
            raise ValueError(f"the {what} file {file_path!r} is empty")
        return value
    return os.environ.get(env) or None


def serve_options(ns: argparse.Namespace):
    from mtpserve.server.frontend import ServeOptions
    from mtpserve.server.tls import TlsFiles

    for flag in ("max_queue_len", "max_queued_tokens", "max_body_bytes"):
        value = getattr(ns, flag)
        if value is not None and value < 1:
            raise ValueError(f"--{flag} must be >= 1, got {value}")
    if ns.request_timeout is not None and not ns.request_timeout > 0:
        raise ValueError(f"--request_timeout must be > 0 (seconds), got {ns.request_timeout}")
    if not ns.shutdown_timeout >= 0:
        raise ValueError(f"--shutdown_timeout must be >= 0 (seconds), got {ns.shutdown_timeout}")
    if bool(ns.ssl_certfile) != bool(ns.ssl_keyfile):
        raise ValueError("TLS needs both --ssl_certfile and --ssl_keyfile")
    tls = TlsFiles.load(ns.ssl_certfile, ns.ssl_keyfile) if ns.ssl_certfile else None
    return ServeOptions(max_queue_len=ns.max_queue_len, max_queued_tokens=ns.max_queued_tokens,
                        request_timeout_s=ns.request_timeout, max_body_bytes=ns.max_body_bytes,
                        shutdown_timeout_s=ns.shutdown_timeout, exit_on_rank_failure=ns.exit_on_rank_failure,
                        cluster_token=read_secret(None, ns.cluster_token_file, "MTPSERVE_CLUSTER_TOKEN",
                                                  "cluster token"), tls=tls)


def cmd_serve(ns: argparse.Namespace) -> int:
    check_serve_flags(ns)
    options = serve_options(ns)
    api_key = read_secret(ns.api_key, ns.api_key_file, "MTPSERVE_API_KEY", "API key")
    args = rank_engine_args(ns, ns.node_rank)
    check_layout_fits_model(ns, args.model_path)  # a missing model directory fails here too
    if ns.nnodes == 1:
        from mtpserve.server.serve import serve

        serve(args, host=ns.host, port=ns.port, api_key=api_key, served_model_name=ns.served_model_name,
              log_level=ns.log_level, grpc_port=ns.grpc_port, options=options, api_server_count=ns.api_server_count)
        return 0
    from mtpserve.control.agent import ControlError

    try:
        if ns.node_rank > 0:  # a tensor-parallel worker: no APIs, rank 0's steps only
            from mtpserve.ranks import run_worker

            run_worker(args, ns.nnodes, ns.node_rank, ns.master_node_addr, ns.log_level,
                       cluster_token=options.cluster_token)
        from mtpserve.server.serve import serve

        serve(args, host=ns.host, port=ns.port, api_key=api_key, served_model_name=ns.served_model_name,
              log_level=ns.log_level, grpc_port=ns.grpc_port, nnodes=ns.nnodes,
              master_node_addr=ns.master_node_addr, options=options)
    except ControlError as e:  # refused by, or lost, the control plane while starting
        print(f"mtpserve: error: rank {ns.node_rank}: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_launch(ns: argparse.Namespace) -> int:
    from mtpserve.launch import launch

    if "--node_rank" in " ".join(ns.raw_argv):
        raise ValueError("mtpserve launch sets --node_rank for each rank itself; leave it out")
    check_serve_flags(argparse.Namespace(**{**vars(ns), "master_node_addr": ns.master_node_addr or "127.0.0.1:1"}))
    check_layout_fits_model(ns, rank_engine_args(ns, 0).model_path)
    return launch(ns.nnodes, ns.raw_argv, ns.master_node_addr)


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address of the HTTP API")
    parser.add_argument("--port", type=int, default=8000, help="port of the HTTP API")
    parser.add_argument("--grpc_port", type=int, default=0, help="port of the public gRPC API (proto/mtpserve.proto) "
                        "on --host; 0 (default): no gRPC API")
    parser.add_argument("--api_key", default=None, help="require 'Authorization: Bearer <key>' (all but /health); "
                        "visible to every local user in the process list: prefer --api_key_file or $MTPSERVE_API_KEY")
    parser.add_argument("--api_key_file", default=None, help="read the API key from this file")
    parser.add_argument("--cluster_token_file", default=None, help="multi-rank: a shared secret every control-plane "
                        "RPC must carry (or $MTPSERVE_CLUSTER_TOKEN; never on the command line)")
    parser.add_argument("--ssl_certfile", default=None, help="serve HTTPS, and the gRPC API over TLS, with this "
                        "PEM certificate (chain); needs --ssl_keyfile")
    parser.add_argument("--ssl_keyfile", default=None, help="the certificate's unencrypted PEM private key")
    parser.add_argument("--api_server_count", type=int, default=1, help="processes that serve the APIs before the "
                        "one engine (each with its own GIL: tokenizing, detokenizing and streaming for its "
                        "connections); more than 1 where one frontend cannot keep up with the engine")
    parser.add_argument("--max_queue_len", type=int, default=None, help="requests waiting for their first token "
                        "beyond which new ones get 503 with Retry-After (default: no limit)")
    parser.add_argument("--max_queued_tokens", type=int, default=None, help="prompt tokens of waiting requests "
                        "beyond which new ones get 503 (default: no limit)")
    parser.add_argument("--request_timeout", type=float, default=None, help="seconds after which a request is "
                        "aborted and its KV blocks freed (default: none)")
    parser.add_argument("--max_body_bytes", type=int, default=16 << 20, help="larger HTTP request bodies get 413")
    parser.add_argument("--shutdown_timeout", type=float, default=30.0, help="SIGTERM: seconds running requests "
                        "get to finish before they are ended with an error (0: exit at once)")
    parser.add_argument("--exit_on_rank_failure", type=parse_bool, default=True, help="rank 0 exits (code 1) when "
                        "a rank of its group fails, after failing open requests; false: stay up answering 503")
    parser.add_argument("--served_model_name", default=None, help="model name of the API (default: the model "
                                                                  "directory's name)")
    parser.add_argument("--log_level", default="info", type=str.lower,
                        choices=("critical", "error", "warning", "info", "debug", "trace"))
    parser.add_argument("--master_node_addr", default=None, help="host:port of rank 0's control service")
    parser.add_argument("--nnodes", type=int, default=1, help="number of ranks (= tensor-parallel size times "
                        "--dp_size)")
    parser.add_argument("--node_rank", type=int, default=0, help="this process's rank")
    parser.add_argument("--enable_mla", type=parse_bool, default=True, help="MLA attention (DeepSeek-V3: true)")


def cmd_bench(ns: argparse.Namespace) -> int:
    from mtpserve.bench.runner import main as bench_main

    return bench_main(ns)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mtpserve", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="generate completions offline")
    add_engine_flags(gen)
    gen.add_argument("--prompt", action="append", required=True, help="a prompt (repeat for several)")
    gen.add_argument("--chat", type=parse_bool, default=True, help="wrap prompts in the chat template")
    gen.add_argument("--max_tokens", type=int, default=64)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top_p", type=float, default=1.0)
    gen.add_argument("--top_k", type=int, default=0)
    gen.add_argument("--sampling_seed", type=int, default=None)
    gen.set_defaults(run=cmd_generate)
    exp = commands.add_parser("export-mtp", help="export a checkpoint's MTP layer as a --draft_model directory")
    exp.add_argument("--input-dir", "--input_dir", dest="input_dir", required=True,
                     help="HF DeepSeek-V3 checkpoint directory with an MTP layer")
    exp.add_argument("--output-dir", "--output_dir", dest="output_dir", required=True,
                     help="where to write the draft-model directory")
    exp.add_argument("--force", action="store_true", help="write into a non-empty output directory")
    exp.set_defaults(run=cmd_export_mtp)
    srv = commands.add_parser("serve", help="serve the OpenAI-compatible HTTP API", allow_abbrev=False)
    add_engine_flags(srv)
    add_serve_flags(srv)
    srv.set_defaults(run=cmd_serve)
    lch = commands.add_parser("launch", help="start and supervise --nnodes local ranks of `mtpserve serve`",
                              allow_abbrev=False)
    add_engine_flags(lch)
    add_serve_flags(lch)
    lch.set_defaults(run=cmd_launch)
    bench = commands.add_parser("bench", help="benchmark an OpenAI-compatible server (vLLM bench_serving style)")
    add_bench_args(bench)
    bench.set_defaults(run=cmd_bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(argv)
    ns.raw_argv = argv[1:]  # the flags after the command (`mtpserve launch` hands them to its ranks)
    try:
        return ns.run(ns)
    except (ValueError, OSError) as e:  # bad flags or configs, ports in use, unreadable files: one line
        print(f"mtpserve: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
