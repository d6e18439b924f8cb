"""Builds the C++ engine from EngineArgs: model, tokenizer, KV-cache size, scheduler settings."""
from __future__ import annotations

import logging
import os
import time
from typing import Callable

import torch

from mtpserve import _C
from mtpserve.engine_args import EngineArgs
from mtpserve.model_loader import LoadedModel, load_draft, load_model
from mtpserve.structured_output import GrammarMasker
from mtpserve.tokenizer import Tokenizer

logger = logging.getLogger("mtpserve")


def cache_memory(device: str, utilization: float) -> int:
    """Bytes the KV cache may take: on a GPU or NPU, what keeps the device's total use (weights loaded) at
    `utilization` of its memory, as xLLM's --max_memory_utilization; on the CPU, that share of free RAM."""
    kind = device.split(":")[0]
    if kind in ("cuda", "npu"):  # torch.npu (torch_npu) mirrors torch.cuda's memory queries
        free, total = getattr(torch, kind).mem_get_info(torch.device(device))
        return max(0, free - int(total * (1 - utilization)))
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * utilization)


def cache_blocks(args: EngineArgs, model: LoadedModel, max_model_len: int) -> int:
    """--max_cache_blocks, else the blocks that fit in cache_memory(), capped at what
    max_seqs_per_batch sequences of max_model_len tokens could ever hold."""
    if args.max_cache_blocks is not None:
        return args.max_cache_blocks
    layers = model.config.num_hidden_layers + len(model.mtp_layers)
    bytes_per_block = args.block_size * model.config.cache_dim * model.dtype.itemsize * layers
    by_memory = (cache_memory(args.device, args.max_memory_utilization) - stash_bytes(args, model)) // bytes_per_block
    if by_memory < 1:
        raise ValueError(f"no memory left for the KV cache on {args.device} at max_memory_utilization="
                         f"{args.max_memory_utilization} (one block of {args.block_size} tokens needs "
                         f"{bytes_per_block} bytes)")
    useful = args.max_seqs_per_batch * -(-max_model_len // args.block_size)
    return max(1, min(by_memory, useful))


def stash_bytes(args: EngineArgs, model: LoadedModel) -> int:
    """The engine's stash of hidden states whose MTP fill waits (adaptive policy with MTP): a row per deferred
    position of every sequence a step may run."""
    if not args.num_speculative_tokens or args.speculative_policy != "adaptive":
        return 0
    rows = args.max_seqs_per_batch * args.deferred_fill_positions
    return rows * model.config.hidden_size * model.dtype.itemsize


def _load(args: EngineArgs, tp: _C.TensorParallel | None,
          agree_num_blocks: Callable[[int, bool], int] | None) -> tuple[LoadedModel, int, int]:
    """The model (this rank's shards), max_model_len and the KV-block count."""
    if args.ep_size > 1 and (tp is None or not tp.expert_parallel):
        raise ValueError(f"ep_size={args.ep_size} needs {args.ep_size} ranks (--nnodes {args.ep_size}); this engine "
                         "runs on one")
    if args.dp_size > 1 and tp is None:
        raise ValueError(f"dp_size={args.dp_size} needs at least {args.dp_size} ranks (mtpserve serve --nnodes); "
                         "this engine runs on one")
    speculative = args.num_speculative_tokens > 0
    own_mtp = speculative and args.draft_model is None
    model = load_model(args.model_path, args.dtype, args.device, with_mtp=own_mtp, tp=tp,
                       batch_invariant=args.batch_invariant)
    if speculative and not own_mtp:
        load_draft(args.draft_model, model)
    if speculative and not model.mtp_layers:
        raise ValueError(f"--num_speculative_tokens {args.num_speculative_tokens} needs an MTP layer, but "
                         f"{args.model_path} has num_nextn_predict_layers=0")
    max_model_len = args.max_model_len or model.config.max_position_embeddings
    if max_model_len > model.config.max_position_embeddings:
        raise ValueError(f"max_model_len={max_model_len} exceeds the model's max_position_embeddings="
                         f"{model.config.max_position_embeddings}")
    num_blocks = cache_blocks(args, model, max_model_len)
    if agree_num_blocks is not None:
        # Sized from free RAM, the count is shared by every CPU rank on this host.
        num_blocks = agree_num_blocks(num_blocks, args.max_cache_blocks is None and args.device == "cpu")
    return model, max_model_len, num_blocks


class WorkerCore:
    """Tensor-parallel ranks 1..N-1: this rank's shards, its caches and the C++ Worker that runs
    the forwards rank 0's engine announces (run() blocks, without the GIL, until shutdown)."""

    def __init__(self, args: EngineArgs, tp: _C.TensorParallel, agree_num_blocks: Callable[[int, bool], int]):
        self.args = args
        self.model, self.max_model_len, self.num_blocks = _load(args, tp, agree_num_blocks)
        caches, mtp_caches = self.model.allocate_caches(self.num_blocks, args.block_size)
        mtp = self.model.mtp_layers[0] if self.model.mtp_layers else None
        self.worker = _C.Worker(self.model.target, caches, mtp, mtp_caches[0] if mtp else None)

    def run(self) -> None:
        self.worker.run()

    @property
    def steps(self) -> int:
        return self.worker.steps


class EngineCore:
    """The loaded model, its tokenizer and the running C++ engine.

    Tensor parallel (a `tp` of size > 1): this is rank 0 of its attention group, holding its shards;
    `agree_num_blocks(fits_here, sized_from_shared_host_memory)` returns the KV-block count every
    rank allocates (the control plane's minimum). The group's other ranks build a WorkerCore instead.
    `lockstep`: the attention groups' step agreement (data-parallel attention with expert parallelism)."""

    def __init__(self, args: EngineArgs, tp: _C.TensorParallel | None = None,
                 agree_num_blocks: Callable[[int, bool], int] | None = None, lockstep: _C.StepLockstep | None = None):
        self.args = args
        self.lockstep = lockstep
        self.model, self.max_model_len, self.num_blocks = _load(args, tp, agree_num_blocks)
        self.tokenizer = Tokenizer.from_dir(args.model_path)
        self.grammars = GrammarMasker(self.tokenizer.to_json(), self.model.config.vocab_size, self._eos_token_ids())
        caches, mtp_caches = self.model.allocate_caches(self.num_blocks, args.block_size)
        # k > num_nextn_predict_layers reuses the first MTP layer on its own output, as DeepSeek-V3 does.
        mtp = self.model.mtp_layers[0] if self.model.mtp_layers else None
        self.graph_memory = 0  # bytes the CUDA graphs recorded at start-up hold (set by _start)
        self.engine = self._start(caches, mtp, mtp_caches[0] if mtp else None)

    def _start(self, caches, mtp, mtp_cache) -> _C.Engine:
        """The C++ engine; on a GPU it captures its decode graphs first, logged with their time and memory."""
        on_gpu = self.args.device.startswith("cuda")
        before = torch.cuda.memory_reserved(self.args.device) if on_gpu else 0
        start = time.perf_counter()
        engine = _C.Engine(self._config(), self.model.target, caches, mtp, mtp_cache)
        if engine.num_graphs():
            torch.cuda.empty_cache()  # the warm-up runs' cached blocks are not graph memory
            self.graph_memory = torch.cuda.memory_reserved(self.args.device) - before
            logger.info("captured %d CUDA graphs (batch sizes up to %d) in %.1f s, %.0f MiB", engine.num_graphs(),
                     min(self.args.graph_max_batch, self.args.max_seqs_per_batch), time.perf_counter() - start,
                     self.graph_memory / 2**20)
        return engine

    def _config(self) -> _C.EngineConfig:
        config = _C.EngineConfig()
        config.block_size = self.args.block_size
        config.num_blocks = self.num_blocks
        config.enable_prefix_cache = self.args.enable_prefix_cache
        config.max_model_len = self.max_model_len
        config.eos_token_ids = self._eos_token_ids()
        config.seed = self.args.seed
        config.num_speculative_tokens = self.args.num_speculative_tokens
        config.enable_graph = self.args.enable_graph
        config.graph_max_batch = self.args.graph_max_batch
        config.enable_prefill_graph = self.args.enable_prefill_graph
        config.speculative_policy = getattr(_C.SpeculationPolicyKind, self.args.speculative_policy)
        config.deferred_fill_positions = self.args.deferred_fill_positions
        config.plan_ahead = self.args.plan_ahead
        config.token_masker = _C.TokenMasker(self.grammars.fill, self.grammars.revise_drafts)
        config.lockstep = self.lockstep
        scheduler = _C.SchedulerConfig()
        scheduler.max_tokens_per_batch = self.args.max_tokens_per_batch
        scheduler.max_seqs_per_batch = self.args.max_seqs_per_batch
        scheduler.enable_chunked_prefill = self.args.enable_chunked_prefill
        scheduler.num_speculative_tokens = self.args.num_speculative_tokens
        config.scheduler = scheduler
        return config

    def _eos_token_ids(self) -> list[int]:
        return sorted(set(self.model.config.eos_token_ids) | set(self.tokenizer.eos_token_ids))

    def shutdown(self) -> None:
        self.engine.shutdown()
