"""Results of the offline API, shaped like vLLM's so that code written against vLLM reads them."""
from __future__ import annotations

from dataclasses import dataclass, field

FINISH_REASONS = ("stop", "length", "abort", None)


def acceptance_rate(accepted_tokens: float, draft_tokens: float) -> float | None:
    """Accepted drafts over proposed drafts (None before any draft)."""
    return accepted_tokens / draft_tokens if draft_tokens else None


def mean_acceptance_length(accepted_tokens: float, drafts: float) -> float | None:
    """Tokens per verify step: the accepted drafts plus the target's own token (None before any draft)."""
    return 1 + accepted_tokens / drafts if drafts else None


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None  # 1 = most likely token
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None = None
    logprobs: list[dict[int, Logprob]] | None = None  # one dict per output token
    finish_reason: str | None = None  # "stop" (EOS, stop id or stop string), "length", "abort"
    stop_reason: int | str | None = None  # the stop token id or stop string; None for EOS

    def __post_init__(self):
        if self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"finish_reason must be one of {FINISH_REASONS}, got {self.finish_reason!r}")

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finished_time: float | None = None
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache
    num_generation_tokens: int = 0
    # Speculative decoding: one draft = one run of k MTP proposals for this request.
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)  # [j] = drafts whose token j was accepted
    steps_by_k: list[int] = field(default_factory=list)  # [k] = its decode steps that verified k drafts
    # Times the adaptive policy retired it from drafting (its drafts did not pay: no more MTP fills or drafts);
    # 0 or 1, unless a preemption let it draft again.
    retired_from_drafting: int = 0

    @property
    def acceptance_rate(self) -> float | None:
        return acceptance_rate(self.num_accepted_tokens, self.num_draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        return mean_acceptance_length(self.num_accepted_tokens, self.num_drafts)

    @property
    def time_to_first_token(self) -> float | None:
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    metrics: RequestMetrics | None = None
    # With prompt_logprobs: one per prompt token, None for the first (nothing predicts it).
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None
