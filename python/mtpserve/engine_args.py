"""Engine arguments, named like the server flags (xLLM spelling), shared by LLM, the CLI and serve."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mtpserve.devices import resolve_device

# The small trained DeepSeek-V3 + MTP model shipped in the repository.
DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "models" / "tiny-dsv3-mtp"
SPECULATIVE_POLICIES = ("adaptive", "fixed")


@dataclass
class EngineArgs:
    model: str | None = None
    devices: str = "auto"
    dtype: str = "auto"
    block_size: int = 128
    max_memory_utilization: float = 0.9
    max_cache_blocks: int | None = None
    max_tokens_per_batch: int = 10240
    max_seqs_per_batch: int = 256
    enable_prefix_cache: bool = True
    enable_chunked_prefill: bool = True
    max_model_len: int | None = None
    draft_model: str | None = None
    draft_devices: str | None = None
    num_speculative_tokens: int = 0
    # How many of the num_speculative_tokens drafts each step takes: "adaptive" picks k per step (and
    # fewer for sequences whose drafts are rarely accepted) from measured step costs and acceptance,
    # so MTP does not slow decoding down; "fixed" always drafts num_speculative_tokens.
    speculative_policy: str = "adaptive"
    # Adaptive policy, one rank: a sequence given no drafts defers the MTP layer's cache fill for up to this
    # many positions (their hidden states wait on the device, max_seqs_per_batch x this many rows) and catches
    # up when it drafts again; 0: the fill runs every step. Unset: 64 on the CPU, 0 on accelerators (the
    # deferral has not run on a GPU or an NPU yet).
    deferred_fill_positions: int | None = None
    # The adaptive policy plans each step's drafts while the target forward runs instead of after it, while the
    # device waits (the plan then lacks that step's own verifications). Unset: on accelerators, whose forwards
    # run asynchronously; not on the CPU, where the forward is the host's own work and nothing is hidden.
    plan_ahead: bool | None = None
    seed: int = 0
    # Batch-invariant kernels: each token's result is bit-identical whatever else is in the step
    # (greedy MTP == no MTP, a seeded request == itself under any load, in every dtype); CPU and CUDA.
    batch_invariant: bool = False
    # Decode steps of up to graph_max_batch sequences replay CUDA graphs captured at start-up (GPUs only).
    enable_graph: bool = True
    graph_max_batch: int = 256
    # With enable_graph, steps with prompt tokens replay CUDA graphs too, one per padded row count up to
    # max_tokens_per_batch, captured at start-up (on one rank; with tensor parallelism they run eagerly).
    enable_prefill_graph: bool = True
    # Expert parallelism: 1, or the number of ranks (--nnodes), each then holding its share of the routed
    # experts whole (attention stays tensor parallel over the ranks of each attention group).
    ep_size: int = 1
    # Data-parallel attention: the ranks form dp_size attention groups, each with its own scheduler, requests
    # and KV cache (tensor parallel inside a group of nnodes / dp_size ranks); rank 0 balances requests.
    dp_size: int = 1
    device: str = field(init=False, repr=False)  # the torch device this rank runs on

    def __post_init__(self):
        if self.model is None:
            self.model = str(DEFAULT_MODEL)
        for name in ("block_size", "max_tokens_per_batch", "max_seqs_per_batch", "graph_max_batch", "ep_size",
                     "dp_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not 0 < self.max_memory_utilization <= 1:
            raise ValueError(f"max_memory_utilization must be in (0, 1], got {self.max_memory_utilization!r}")
        if self.max_cache_blocks is not None and self.max_cache_blocks <= 0:
            raise ValueError(f"max_cache_blocks must be a positive integer, got {self.max_cache_blocks!r}")
        if self.max_model_len is not None and self.max_model_len <= 1:
            raise ValueError(f"max_model_len must be > 1, got {self.max_model_len!r}")
        if not isinstance(self.num_speculative_tokens, int) or self.num_speculative_tokens < 0:
            raise ValueError(f"num_speculative_tokens must be an integer >= 0, got {self.num_speculative_tokens!r}")
        if self.speculative_policy not in SPECULATIVE_POLICIES:
            raise ValueError(f"speculative_policy must be one of {', '.join(SPECULATIVE_POLICIES)}, got "
                             f"{self.speculative_policy!r}")
        self.device = resolve_device(self.devices)
        if self.plan_ahead is None:
            self.plan_ahead = self.device != "cpu"
        for name in ("batch_invariant", "enable_graph", "enable_prefill_graph", "plan_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.deferred_fill_positions is None:
            self.deferred_fill_positions = 64 if self.device == "cpu" else 0
        if not isinstance(self.deferred_fill_positions, int) or self.deferred_fill_positions < 0:
            raise ValueError(f"deferred_fill_positions must be an integer >= 0, got {self.deferred_fill_positions!r}")
        if self.draft_devices is not None and self.draft_devices.strip() not in (self.devices.strip(), self.device):
            raise ValueError(f"draft_devices={self.draft_devices!r} must equal devices={self.devices!r}: the MTP "
                             "layer runs on the target's devices")
        if self.draft_model is not None and not (Path(self.draft_model) / "config.json").is_file():
            raise FileNotFoundError(f"--draft_model {self.draft_model}: no config.json there")

    @property
    def model_path(self) -> Path:
        path = Path(self.model)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"--model {self.model}: no config.json there; pass an HF DeepSeek-V3 directory")
        return path
