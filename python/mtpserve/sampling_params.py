"""Per-request sampling parameters, shaped like vLLM's, validated up front so a bad request fails
with a clear message before it reaches the engine."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from mtpserve.structured_output import GrammarMasker, StructuredOutput

MAX_LOGPROBS = 20
_UINT64 = 1 << 64
_INT64_MAX = (1 << 63) - 1  # the engine's ints are int64: larger values cannot reach it


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    min_p: float = 0.0
    seed: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0  # > 1 discourages prompt and output tokens (vLLM's rule); 1: off
    logit_bias: dict[int, float] | None = None  # token id -> added to its logit (-100 bans, 100 forces)
    min_tokens: int = 0  # EOS and stop_token_ids cannot be sampled before this many output tokens
    max_tokens: int = 16
    stop: str | list[str] | None = None  # normalised to a list
    stop_token_ids: list[int] | None = field(default=None)  # normalised to a list
    ignore_eos: bool = False
    logprobs: int | None = None  # top-n logprobs per output token, besides the chosen token's
    prompt_logprobs: int | None = None  # the same for each prompt token (computed in the prefill)
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_output: StructuredOutput | None = None  # a grammar the output must follow

    def __post_init__(self):
        def bad(name, requirement):
            raise ValueError(f"{name} must be {requirement}, got {getattr(self, name)!r}")

        if self.n != 1:
            bad("n", "1 (only one completion per request is supported)")
        if not _is_number(self.temperature) or self.temperature < 0:
            bad("temperature", "a number >= 0")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            bad("top_p", "in (0, 1]")
        if not _is_int(self.top_k) or self.top_k < -1:
            bad("top_k", "an int >= -1 (0 or -1 disables it)")
        if self.top_k > _INT64_MAX:
            bad("top_k", f"<= {_INT64_MAX}")
        if not _is_number(self.min_p) or not 0 <= self.min_p <= 1:
            bad("min_p", "in [0, 1]")
        if self.seed is not None and not _is_int(self.seed):
            bad("seed", "an int or None")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not _is_number(value) or not -2 <= value <= 2:
                bad(name, "in [-2, 2]")
        if not _is_number(self.repetition_penalty) or not 0 < self.repetition_penalty <= 2:
            bad("repetition_penalty", "in (0, 2]")
        bias = {} if self.logit_bias is None else self.logit_bias
        if not isinstance(bias, dict) or not all(_is_int(t) and 0 <= t <= _INT64_MAX and _is_number(v)
                                                 and -100 <= v <= 100 for t, v in bias.items()):
            bad("logit_bias", "a map of token ids to numbers in [-100, 100]")
        self.logit_bias = dict(bias)
        if not _is_int(self.min_tokens) or self.min_tokens < 0:
            bad("min_tokens", "an int >= 0")
        if not _is_int(self.max_tokens) or self.max_tokens <= 0:
            bad("max_tokens", "an int > 0")
        if self.max_tokens > _INT64_MAX:
            bad("max_tokens", f"<= {_INT64_MAX}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or not 0 <= value <= MAX_LOGPROBS):
                bad(name, f"None or an int in 0..{MAX_LOGPROBS}")

        stop = [] if self.stop is None else [self.stop] if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"unknown stop type: stop must be a non-empty str or a list of non-empty str, "
                             f"got {self.stop!r}")
        self.stop = list(stop)
        ids = [] if self.stop_token_ids is None else self.stop_token_ids
        if not isinstance(ids, (list, tuple)) or not all(_is_int(i) and 0 <= i <= _INT64_MAX for i in ids):
            bad("stop_token_ids", f"a list of non-negative ints <= {_INT64_MAX}")
        self.stop_token_ids = list(ids)
        if self.structured_output is not None and not isinstance(self.structured_output, StructuredOutput):
            bad("structured_output", "None or a StructuredOutput")
        if self.structured_output is not None and self.min_tokens:
            bad("min_tokens", "0 with a structured output, whose grammar decides where the output ends")

    @property
    def greedy(self) -> bool:
        """Sampling collapses to argmax (the same rule as the C++ SamplingParams::greedy)."""
        return self.temperature == 0 or self.top_k == 1

    def to_cpp(self, grammars: GrammarMasker | None = None):
        """The engine's mtpserve._C.SamplingParams with the same values; a structured output gets a fresh
        grammar state from `grammars` (the engine's masker)."""
        from mtpserve import _C

        p = _C.SamplingParams()
        p.temperature = float(self.temperature)
        p.top_p = float(self.top_p)
        p.top_k = max(self.top_k, 0)  # one spelling of "off" for the engine
        p.min_p = float(self.min_p)
        # Python ints are unbounded; the engine's seed is a uint64, so negative seeds wrap.
        p.seed = None if self.seed is None else self.seed % _UINT64
        p.presence_penalty = float(self.presence_penalty)
        p.frequency_penalty = float(self.frequency_penalty)
        p.repetition_penalty = float(self.repetition_penalty)
        p.logit_bias = [(t, float(v)) for t, v in self.logit_bias.items()]
        p.min_tokens = min(self.min_tokens, self.max_tokens)
        p.max_tokens = self.max_tokens
        p.stop_token_ids = list(self.stop_token_ids)
        p.ignore_eos = self.ignore_eos
        p.logprobs = -1 if self.logprobs is None else self.logprobs
        p.prompt_logprobs = -1 if self.prompt_logprobs is None else self.prompt_logprobs
        if self.structured_output is not None:
            if grammars is None:
                raise ValueError("structured output needs the engine's grammar masker (EngineCore.grammars)")
            p.constraint = grammars.constraint(self.structured_output)
        return p
