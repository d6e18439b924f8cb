"""The offline API: mtpserve.LLM(model=..., **engine_args).generate(prompts, SamplingParams)."""
from __future__ import annotations

import itertools
from typing import Sequence

from tqdm import tqdm

from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.output_processor import RequestState
from mtpserve.outputs import RequestOutput
from mtpserve.sampling_params import SamplingParams

Prompt = str | list[int]


class LLM:
    def __init__(self, model: str | None = None, **engine_args):
        self.core = EngineCore(EngineArgs(model=model, **engine_args))
        self.tokenizer = self.core.tokenizer
        self._ids = itertools.count()

    def generate(self, prompts: Prompt | Sequence[Prompt], sampling_params: SamplingParams | list | None = None,
                 use_tqdm: bool = False) -> list[RequestOutput]:
        """One result per prompt, in order. Prompts are text or token-id lists."""
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"got {len(params)} sampling params for {len(prompts)} prompts")
        # The call fails as a whole (nothing is queued), and its first step sees every request: a batch
        # whose first request stepped alone planned that step as a batch of one.
        requests = [self._request(prompt, sp or SamplingParams()) for prompt, sp in zip(prompts, params)]
        self.core.engine.add_requests([r for _, r in requests])
        states = [state for state, _ in requests]
        self._run(states, use_tqdm)
        return [s.output() for s in states]

    def chat(self, messages: list[dict] | list[list[dict]], sampling_params: SamplingParams | list | None = None,
             use_tqdm: bool = False) -> list[RequestOutput]:
        conversations = [messages] if messages and isinstance(messages[0], dict) else messages
        prompts = [self.tokenizer.encode(self.tokenizer.apply_chat_template(c, add_generation_prompt=True),
                                         add_special_tokens=False) for c in conversations]
        return self.generate(prompts, sampling_params, use_tqdm)

    def stats(self):
        return self.core.engine.stats()

    def shutdown(self) -> None:
        self.core.shutdown()

    def _request(self, prompt: Prompt, params: SamplingParams) -> tuple[RequestState, tuple]:
        """The request's state and what the engine's add_requests takes for it."""
        if isinstance(prompt, str):
            text, ids = prompt, self.tokenizer.encode(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            text, ids = None, list(prompt)
        else:
            raise ValueError(f"a prompt must be a string or a list of token ids, got {type(prompt).__name__}")
        state = RequestState(str(next(self._ids)), text, ids, params, self.tokenizer)
        return state, (state.request_id, ids, params.to_cpp(self.core.grammars))

    def _run(self, states: list[RequestState], use_tqdm: bool) -> None:
        by_id = {s.request_id: s for s in states}
        pending = set(by_id)
        with tqdm(total=len(states), desc="Generating", disable=not use_tqdm) as bar:
            while pending:
                for delta in self.core.engine.get_outputs(0.5):
                    state = by_id.get(delta.request_id)
                    if state is None or state.request_id not in pending:
                        continue
                    # After a stop string, tokens still in flight are dropped; the engine's own
                    # final output (the abort) confirms the request's blocks are free.
                    if not state.finished and state.process([delta]):
                        self.core.engine.abort(state.request_id)
                    if delta.finished:
                        pending.discard(state.request_id)
                        bar.update()
        failed = [s for s in states if s.error]
        if failed:
            raise RuntimeError(f"request {failed[0].request_id} failed in the engine: {failed[0].error}")
