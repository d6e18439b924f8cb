"""A group of ranks as real processes (torch.multiprocessing): rank 0 runs the engine on each of a list of
settings and generates, the other ranks replay its steps with their shards (WorkerCore), as `mtpserve
serve --nnodes N` does, without the HTTP server. With dp_size > 1 the first rank of every other attention
group runs that group's engine for rank 0 (GroupLeaderCore). Used by the tensor-, expert- and
data-parallel tests."""
from __future__ import annotations


import torch
import torch.multiprocessing as mp

from mtpserve import distributed
from mtpserve.data_parallel import DataParallelCore
from mtpserve.engine import EngineCore, WorkerCore
from mtpserve.group_link import GroupLeaderCore
from mtpserve.engine_args import EngineArgs
from mtpserve.launch import free_port_pair
from mtpserve.sampling_params import SamplingParams



def generate(core: EngineCore, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
    """Every prompt at once (batched steps); per prompt its token ids and, when asked for, their logprobs."""
    results = {str(i): {"tokens": [], "logprobs": [], "spec": (0, 0, 0)} for i in range(len(prompts))}
    for i, prompt in enumerate(prompts):
        if isinstance(core, DataParallelCore):
            core.submit(str(i), prompt, params)
        else:
            core.engine.add_request(str(i), prompt, params.to_cpp())
    pending = set(results)
    while pending:
        for delta in core.engine.get_outputs(0.5):
            assert not delta.error, delta.error
            results[delta.request_id]["tokens"] += delta.token_ids
            results[delta.request_id]["logprobs"] += [dict(lp.top) for lp in delta.logprobs]
            spec = delta.spec  # cumulative: the last output holds the request's totals
            results[delta.request_id]["spec"] = (spec.drafts, spec.draft_tokens, spec.accepted_tokens)
            if delta.finished:
                pending.discard(delta.request_id)
    return [results[str(i)] for i in range(len(prompts))]


def _rank(rank, world, port, devices, ep_size, dp_size, runs, prompts, params, out_file):
    groups = distributed.init_groups(rank, world, f"127.0.0.1:{port}", devices[rank], ep_size=ep_size,
                                     dp_size=dp_size)
    same_blocks = lambda num_blocks, shared: num_blocks  # noqa: E731 (every run sets max_cache_blocks)
    try:
        outputs, by_group = [], []
        for run in runs:
            args = EngineArgs(devices=devices[rank], ep_size=ep_size, dp_size=dp_size, **run)
            if rank == 0:
                core = EngineCore(args, tp=groups.tp, agree_num_blocks=same_blocks, lockstep=groups.lockstep)
                if dp_size > 1:
                    core = DataParallelCore(core, groups.store, dp_size)
                try:
                    outputs.append(generate(core, prompts, params))
                    spec = core.engine.stats().spec
                    by_group.append({"requests": list(core.engine.requests_by_group) if dp_size > 1 else [len(prompts)],
                                     "spec": (spec.drafts, spec.draft_tokens, spec.accepted_tokens),
                                     "graphs": core.engine.num_graphs() if dp_size == 1 else None})
                finally:
                    core.shutdown()
            elif groups.leads_group:
                core = EngineCore(args, groups.tp, same_blocks, groups.lockstep)
                GroupLeaderCore(core, groups.dp_rank, groups.store, "127.0.0.1").run()
            else:
                WorkerCore(args, groups.tp, same_blocks).run()
        if rank == 0:
            torch.save((outputs, by_group), out_file)
    finally:
        distributed.destroy()


def run_group(world: int, runs: list[dict], prompts: list[list[int]], params: SamplingParams, out_file,
              devices: list[str] | None = None, ep_size: int = 1, dp_size: int = 1,
              with_groups: bool = False) -> list[list[dict]]:
    """Rank 0's generate() for each EngineArgs settings in `runs` (each needs max_cache_blocks), on a group
    of `world` ranks; rank i runs on devices[i] (default: the CPU). with_groups: also, per run, how many
    requests each attention group got, the engine's MTP counters (drafts, draft tokens, accepted) and
    how many CUDA graphs rank 0 captured."""
    devices = devices or ["cpu"] * world
    mp.spawn(_rank, args=(world, free_port_pair(), devices, ep_size, dp_size, runs, prompts, params, str(out_file)),
             nprocs=world, join=True)
    outputs, by_group = torch.load(out_file)
    return (outputs, by_group) if with_groups else outputs


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
