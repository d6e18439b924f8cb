"""The `mtpserve` command. Flags follow xLLM's spelling: --flag=value or --flag value, booleans true/false."""
from __future__ import annotations

import argparse
import dataclasses
import sys

from mtpserve.bench.runner import add_bench_args
from mtpserve.engine_args import EngineArgs


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
                       ("num_speculative_tokens", int), ("seed", int)):
        parser.add_argument(f"--{name}", type=kind, default=defaults[name].default)
    parser.add_argument("--batch_invariant", type=parse_bool, nargs="?", const=True,
                        default=defaults["batch_invariant"].default,
                        help="batch-invariant kernels: each token's result is bit-identical whatever else runs in "
                             "its step, so greedy MTP output equals no-MTP output and a seeded request repeats "
                             "under any load, in bf16 too (CPU only; costs throughput, see docs/benchmarks.md)")


def engine_args(ns: argparse.Namespace) -> EngineArgs:
    return EngineArgs(**{f.name: getattr(ns, f.name) for f in dataclasses.fields(EngineArgs) if f.init})


def cmd_generate(ns: argparse.Namespace) -> int:
    from mtpserve.llm import LLM
    from mtpserve.sampling_params import SamplingParams

    llm = LLM(**vars(engine_args(ns)))
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
    """What this build of `mtpserve serve` can run: nnodes ranks in one tensor-parallel group (no
    expert/data parallelism), MLA."""
    from mtpserve.distributed import parse_master_addr

    if ns.nnodes < 1:
        raise ValueError(f"--nnodes must be >= 1, got {ns.nnodes}")
    if not 0 <= ns.node_rank < ns.nnodes:
        raise ValueError(f"--node_rank={ns.node_rank} needs --nnodes > {ns.node_rank}, but --nnodes={ns.nnodes}")
    if ns.nnodes > 1:
        parse_master_addr(ns.master_node_addr)
    for flag in ("ep_size", "dp_size"):
        if getattr(ns, flag) != 1:
            raise ValueError(f"--{flag}={getattr(ns, flag)}: only --{flag}=1 is supported so far")
    if not ns.enable_mla:
        raise ValueError("--enable_mla=false: DeepSeek-V3 models use MLA attention, so --enable_mla must be true")
    if not 0 <= ns.port <= 65535:
        raise ValueError(f"--port must be in 0..65535, got {ns.port}")
    if not 0 <= ns.grpc_port <= 65535:
        raise ValueError(f"--grpc_port must be in 0..65535 (0: no gRPC API), got {ns.grpc_port}")
    if ns.grpc_port and ns.grpc_port == ns.port:
        raise ValueError(f"--grpc_port={ns.grpc_port} must differ from --port")


def cmd_serve(ns: argparse.Namespace) -> int:
    check_serve_flags(ns)
    args = engine_args(ns)
    args.model_path  # a missing model directory fails here, before anything is loaded
    if ns.nnodes == 1:
        from mtpserve.server.serve import serve

        serve(args, host=ns.host, port=ns.port, api_key=ns.api_key, served_model_name=ns.served_model_name,
              log_level=ns.log_level, grpc_port=ns.grpc_port)
        return 0
    from mtpserve.control.agent import ControlError

    try:
        if ns.node_rank > 0:  # a tensor-parallel worker: no APIs, rank 0's steps only
            from mtpserve.ranks import run_worker

            run_worker(args, ns.nnodes, ns.node_rank, ns.master_node_addr, ns.log_level)
        from mtpserve.server.serve import serve

        serve(args, host=ns.host, port=ns.port, api_key=ns.api_key, served_model_name=ns.served_model_name,
              log_level=ns.log_level, grpc_port=ns.grpc_port, nnodes=ns.nnodes,
              master_node_addr=ns.master_node_addr)
    except ControlError as e:  # refused by, or lost, the control plane while starting
        print(f"mtpserve: error: rank {ns.node_rank}: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_launch(ns: argparse.Namespace) -> int:
    from mtpserve.launch import launch

    if "--node_rank" in " ".join(ns.raw_argv):
        raise ValueError("mtpserve launch sets --node_rank for each rank itself; leave it out")
    check_serve_flags(argparse.Namespace(**{**vars(ns), "master_node_addr": ns.master_node_addr or "127.0.0.1:1"}))
    engine_args(ns).model_path
    return launch(ns.nnodes, ns.raw_argv, ns.master_node_addr)


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address of the HTTP API")
    parser.add_argument("--port", type=int, default=8000, help="port of the HTTP API")
    parser.add_argument("--grpc_port", type=int, default=0, help="port of the public gRPC API (proto/mtpserve.proto) "
                        "on --host; 0 (default): no gRPC API")
    parser.add_argument("--api_key", default=None, help="require 'Authorization: Bearer <key>' (all but /health)")
    parser.add_argument("--served_model_name", default=None, help="model name of the API (default: the model "
                                                                  "directory's name)")
    parser.add_argument("--log_level", default="info", type=str.lower,
                        choices=("critical", "error", "warning", "info", "debug", "trace"))
    parser.add_argument("--master_node_addr", default=None, help="host:port of rank 0's control service")
    parser.add_argument("--nnodes", type=int, default=1, help="number of ranks = tensor-parallel size")
    parser.add_argument("--node_rank", type=int, default=0, help="this process's rank")
    parser.add_argument("--ep_size", type=int, default=1, help="expert parallel size (only 1 so far)")
    parser.add_argument("--dp_size", type=int, default=1, help="data parallel size (only 1 so far)")
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
    except (ValueError, FileNotFoundError) as e:
        print(f"mtpserve: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
