"""Turns the engine's per-step token deltas into vLLM-shaped results: incremental text, stop
strings (which end a request at exactly the token that completes them), logprobs, metrics."""
from __future__ import annotations

import time

from mtpserve.detokenizer import IncrementalDetokenizer
from mtpserve.outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from mtpserve.sampling_params import SamplingParams
from mtpserve.stop_strings import StopStringMatcher


class RequestState:
    def __init__(self, request_id: str, prompt: str | None, prompt_token_ids: list[int],
                 params: SamplingParams, tokenizer):
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.params = params
        self.tokenizer = tokenizer
        self.detokenizer = IncrementalDetokenizer(tokenizer, prompt_token_ids, params.skip_special_tokens)
        self.stops = StopStringMatcher(params.stop, params.include_stop_str_in_output) if params.stop else None
        self.token_ids: list[int] = []
        self.logprobs: list[dict[int, Logprob]] | None = [] if params.logprobs is not None else None
        self.cumulative_logprob = 0.0 if params.logprobs is not None else None
        self.prompt_logprobs: list[dict[int, Logprob] | None] | None = None  # set by the first output
        self.text = ""
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.error: str | None = None
        self.metrics = RequestMetrics(arrival_time=time.time(), num_prompt_tokens=len(prompt_token_ids))

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None or self.error is not None

    def process(self, deltas) -> bool:
        """Consumes engine outputs, in order: one, or all those a stream found queued together. Returns True when
        a stop string ended the request here, so the caller must abort it in the engine."""
        now = time.time()
        self._record_counters(deltas)
        undecoded: list[int] = []  # without stop strings, the deltas' text is decoded once, not token by token
        for delta in deltas:
            token_ids = delta.token_ids
            if not token_ids:
                continue
            if self.metrics.first_token_time is None:
                self.metrics.first_token_time = now
            if self.params.prompt_logprobs is not None and self.prompt_logprobs is None:
                self.prompt_logprobs = [None] + [self._entry(lp) for lp in delta.prompt_logprobs]
            if self.stops:
                if self._append_until_stop(token_ids, delta.logprobs, now):
                    return True
                continue
            self.token_ids.extend(token_ids)
            if self.logprobs is not None:
                for lp in delta.logprobs:
                    self._add_logprobs(lp)
            undecoded.extend(token_ids)
        if undecoded:
            self.text += self.detokenizer.add(undecoded)
        last = deltas[-1]  # the engine sends nothing after a request's final output
        if last.finished:
            self.metrics.finished_time = now
            if last.finish_reason == "error":
                self.error = last.error
                return False
            self.text += self.detokenizer.flush()
            self.finish_reason = last.finish_reason
            self.stop_reason = last.stop_token
        return False

    def _append_until_stop(self, token_ids, logprobs, now: float) -> bool:
        """Token by token, so that a stop string ends the text at exactly the token that completes it."""
        for i, token in enumerate(token_ids):
            self.token_ids.append(token)
            if self.logprobs is not None:
                self._add_logprobs(logprobs[i])
            new_text = self.detokenizer.add([token])
            self.text += new_text
            if new_text:
                stop, truncated = self.stops.check(self.detokenizer.text, len(new_text))
                if stop is not None:
                    self.text, self.finish_reason, self.stop_reason = truncated, "stop", stop
                    self.metrics.finished_time = now
                    return True
        return False

    def _record_counters(self, deltas) -> None:
        m = self.metrics
        m.num_cached_tokens = max(m.num_cached_tokens, *(delta.num_cached_tokens for delta in deltas))
        spec = deltas[-1].spec  # cumulative: the latest output's are current
        m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens = spec.drafts, spec.draft_tokens, spec.accepted_tokens
        m.accepted_per_position = list(spec.accepted_per_position)
        m.steps_by_k = list(spec.steps_by_k)
        m.retired_from_drafting = spec.retired

    def _entry(self, lp) -> dict[int, Logprob]:
        decode = lambda t: self.tokenizer.decode([t], skip_special_tokens=False)  # noqa: E731
        entry = {lp.token: Logprob(lp.logprob, lp.rank, decode(lp.token))}
        for rank, (token, value) in enumerate(lp.top, start=1):
            entry.setdefault(token, Logprob(value, rank, decode(token)))
        return entry

    def _add_logprobs(self, lp) -> None:
        self.logprobs.append(self._entry(lp))
        self.cumulative_logprob += lp.logprob

    def output(self) -> RequestOutput:
        self.metrics.num_generation_tokens = len(self.token_ids)
        completion = CompletionOutput(0, self.text, list(self.token_ids), self.cumulative_logprob, self.logprobs,
                                      self.finish_reason, self.stop_reason)
        return RequestOutput(self.request_id, self.prompt, self.prompt_token_ids, [completion], self.finished,
                             self.metrics, self.prompt_logprobs)
