"""A group of ranks as real processes (torch.multiprocessing): rank 0 runs the engine on each of a list of
settings and generates, the other ranks replay its steps with their shards (WorkerCore), as `mtpserve
serve --nnodes N` does, without the HTTP server. Used by the tensor- and expert-parallel tests."""
from __future__ import annotations


import torch
import torch.multiprocessing as mp

from mtpserve import distributed
from mtpserve.engine import EngineCore, WorkerCore
from mtpserve.engine_args import EngineArgs
from mtpserve.launch import free_port_pair
from mtpserve.sampling_params import SamplingParams



def generate(core: EngineCore, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
    """Every prompt at once (batched steps); per prompt its token ids and, when asked for, their logprobs."""
    results = {str(i): {"tokens": [], "logprobs": []} for i in range(len(prompts))}
    for i, prompt in enumerate(prompts):
        core.engine.add_request(str(i), prompt, params.to_cpp())
    pending = set(results)
    while pending:
        for delta in core.engine.get_outputs(0.5):
            assert not delta.error, delta.error
            results[delta.request_id]["tokens"] += delta.token_ids
            results[delta.request_id]["logprobs"] += [dict(lp.top) for lp in delta.logprobs]
            if delta.finished:
                pending.discard(delta.request_id)
    return [results[str(i)] for i in range(len(prompts))]


def _rank(rank, world, port, devices, ep_size, runs, prompts, params, out_file):
    tp = distributed.init_tensor_parallel(rank, world, f"127.0.0.1:{port}", devices[rank], ep_size=ep_size)
    same_blocks = lambda num_blocks, shared: num_blocks  # noqa: E731 (every run sets max_cache_blocks)
    try:
        outputs = []
        for run in runs:
            args = EngineArgs(devices=devices[rank], ep_size=ep_size, **run)
            if rank == 0:
                core = EngineCore(args, tp=tp, agree_num_blocks=same_blocks)
                try:
                    outputs.append(generate(core, prompts, params))
                finally:
                    core.shutdown()
            else:
                WorkerCore(args, tp, same_blocks).run()
        if rank == 0:
            torch.save(outputs, out_file)
    finally:
        distributed.destroy()


def run_group(world: int, runs: list[dict], prompts: list[list[int]], params: SamplingParams, out_file,
              devices: list[str] | None = None, ep_size: int = 1) -> list[list[dict]]:
    """Rank 0's generate() for each EngineArgs settings in `runs` (each needs max_cache_blocks), on a group
    of `world` ranks; rank i runs on devices[i] (default: the CPU)."""
    devices = devices or ["cpu"] * world
    mp.spawn(_rank, args=(world, free_port_pair(), devices, ep_size, runs, prompts, params, str(out_file)),
             nprocs=world, join=True)
    return torch.load(out_file)


def one_rank(runs: list[dict], prompts: list[list[int]], params: SamplingParams, device: str = "cpu") -> list:
    """The same runs on one rank, in this process."""
    outputs = []
    for run in runs:
        core = EngineCore(EngineArgs(devices=device, **run))
        try:
            outputs.append(generate(core, prompts, params))
        finally:
            core.shutdown()
    return outputs
