"""Builds the C++ engine from EngineArgs: model, tokenizer, KV-cache size, scheduler settings."""
from __future__ import annotations

import os

from mtpserve import _C
from mtpserve.engine_args import EngineArgs
from mtpserve.model_loader import LoadedModel, load_draft, load_model
from mtpserve.tokenizer import Tokenizer


def cache_blocks(args: EngineArgs, model: LoadedModel, max_model_len: int) -> int:
    """--max_cache_blocks, else --max_memory_utilization of available RAM (on CPU), capped at what
    max_seqs_per_batch sequences of max_model_len tokens could ever hold."""
    if args.max_cache_blocks is not None:
        return args.max_cache_blocks
    layers = model.config.num_hidden_layers + len(model.mtp_layers)
    bytes_per_block = args.block_size * model.config.cache_dim * model.dtype.itemsize * layers
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    by_memory = int(available * args.max_memory_utilization) // bytes_per_block
    useful = args.max_seqs_per_batch * -(-max_model_len // args.block_size)
    return max(1, min(by_memory, useful))


class EngineCore:
    """The loaded model, its tokenizer and the running C++ engine."""

    def __init__(self, args: EngineArgs):
        self.args = args
        speculative = args.num_speculative_tokens > 0
        own_mtp = speculative and args.draft_model is None
        self.model = load_model(args.model_path, args.dtype, args.device, with_mtp=own_mtp)
        if speculative and not own_mtp:
            load_draft(args.draft_model, self.model)
        if speculative and not self.model.mtp_layers:
            raise ValueError(f"--num_speculative_tokens {args.num_speculative_tokens} needs an MTP layer, but "
                             f"{args.model_path} has num_nextn_predict_layers=0")
        self.tokenizer = Tokenizer.from_dir(args.model_path)
        self.max_model_len = args.max_model_len or self.model.config.max_position_embeddings
        if self.max_model_len > self.model.config.max_position_embeddings:
            raise ValueError(f"max_model_len={self.max_model_len} exceeds the model's max_position_embeddings="
                             f"{self.model.config.max_position_embeddings}")
        self.num_blocks = cache_blocks(args, self.model, self.max_model_len)
        caches, mtp_caches = self.model.allocate_caches(self.num_blocks, args.block_size)
        # k > num_nextn_predict_layers reuses the first MTP layer on its own output, as DeepSeek-V3 does.
        mtp = self.model.mtp_layers[0] if self.model.mtp_layers else None
        self.engine = _C.Engine(self._config(), self.model.target, caches, mtp, mtp_caches[0] if mtp else None)

    def _config(self) -> _C.EngineConfig:
        config = _C.EngineConfig()
        config.block_size = self.args.block_size
        config.num_blocks = self.num_blocks
        config.enable_prefix_cache = self.args.enable_prefix_cache
        config.max_model_len = self.max_model_len
        config.eos_token_ids = sorted(set(self.model.config.eos_token_ids) | set(self.tokenizer.eos_token_ids))
        config.seed = self.args.seed
        config.num_speculative_tokens = self.args.num_speculative_tokens
        scheduler = _C.SchedulerConfig()
        scheduler.max_tokens_per_batch = self.args.max_tokens_per_batch
        scheduler.max_seqs_per_batch = self.args.max_seqs_per_batch
        scheduler.enable_chunked_prefill = self.args.enable_chunked_prefill
        scheduler.num_speculative_tokens = self.args.num_speculative_tokens
        config.scheduler = scheduler
        return config

    def shutdown(self) -> None:
        self.engine.shutdown()
