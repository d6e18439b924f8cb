"""Request bodies of the OpenAI-compatible API (pydantic, strict types) and their translation to
SamplingParams. A body that does not fit these shapes is a 422; values that fit but make no sense
(negative max_tokens, best_of < n, top_p 0) are a 400 raised from here or from SamplingParams."""
from __future__ import annotations

import math
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict

from mtpserve.outputs import Logprob
from mtpserve.sampling_params import SamplingParams
from mtpserve.structured_output import StructuredOutput
from mtpserve.server.async_engine import RequestRefused, check_text
from mtpserve.server.errors import APIError


# The most samples one prompt may ask for (n, best_of): each is a full request in the engine.
MAX_CHOICES = 64


class _Strict(BaseModel):
    # Strict: "5" is not an int and 1 is not a bool. Unknown fields are ignored, as OpenAI's
    # clients send fields (user, metadata, ...) that change nothing here.
    model_config = ConfigDict(strict=True, extra="ignore")


class StreamOptions(_Strict):
    include_usage: bool = False


class _SamplingRequest(_Strict):
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None  # vLLM extension
    min_p: float | None = None  # vLLM extension
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None  # vLLM extension
    min_tokens: int | None = None  # vLLM extension
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None  # vLLM extension
    ignore_eos: bool = False  # vLLM extension
    skip_special_tokens: bool = True  # vLLM extension
    include_stop_str_in_output: bool = False  # vLLM extension
    n: int | None = None
    best_of: int | None = None
    logit_bias: dict[str, float] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    response_format: dict[str, Any] | None = None

    def choice_counts(self) -> tuple[int, int]:
        """(n, best_of): the choices returned per prompt, and the samples drawn to pick them from."""
        n = 1 if self.n is None else self.n
        if not 1 <= n <= MAX_CHOICES:
            raise APIError(400, f"n must be in 1..{MAX_CHOICES}, got {n}", param="n")
        best_of = n if self.best_of is None else self.best_of
        if not n <= best_of <= MAX_CHOICES:
            raise APIError(400, f"best_of must be in n..{MAX_CHOICES} (n is {n}), got {best_of}", param="best_of")
        if best_of > n and self.stream:
            raise APIError(400, "best_of greater than n cannot be streamed: the best are known only at the end",
                           param="best_of")
        return n, best_of

    def _check_common(self) -> None:
        self.choice_counts()
        if self.stream_options is not None and not self.stream:
            raise APIError(400, "stream_options can only be set when stream is true", param="stream_options")

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def _logit_bias(self) -> dict[int, float]:
        """OpenAI's logit_bias: token ids as JSON keys (strings)."""
        bias = {}
        for key, value in (self.logit_bias or {}).items():
            try:
                bias[int(key)] = value
            except ValueError:
                raise APIError(400, f"logit_bias keys must be token ids, got {key!r}", param="logit_bias") from None
        return bias

    def _response_format(self) -> StructuredOutput | None:
        """OpenAI's response_format: text, json_object, or json_schema {"name", "schema", ...}."""
        fmt = self.response_format or {"type": "text"}
        kind = fmt.get("type")
        if kind == "text":
            return None
        if kind == "json_object":
            return StructuredOutput.json_object()
        if kind != "json_schema":
            raise APIError(400, f"response_format type must be 'text', 'json_object' or 'json_schema', got {kind!r}",
                           param="response_format")
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise APIError(400, "response_format json_schema must be {'type': 'json_schema', 'json_schema': "
                                "{'name': ..., 'schema': {...}}} with the schema a JSON object",
                           param="response_format")
        return _checked(StructuredOutput.json_schema(spec["schema"]), "response_format: invalid JSON schema",
                        "response_format")

    def _sampling_params(self, max_tokens: int, logprobs: int | None, aliases: dict[str, str] | None = None,
                         structured_output: StructuredOutput | None = None) -> SamplingParams:
        """aliases: the request's name of a SamplingParams field, for the error's `param`."""
        values: dict[str, Any] = dict(max_tokens=max_tokens, logprobs=logprobs, stop=self.stop,
                                      stop_token_ids=self.stop_token_ids, ignore_eos=self.ignore_eos,
                                      skip_special_tokens=self.skip_special_tokens, seed=self.seed,
                                      include_stop_str_in_output=self.include_stop_str_in_output)
        for stop in ([self.stop] if isinstance(self.stop, str) else self.stop or []):
            try:
                check_text(stop, "stop")
            except RequestRefused as e:
                raise APIError(400, str(e), param="stop") from None
        values["logit_bias"] = self._logit_bias()
        values["structured_output"] = structured_output
        for name in ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
                     "repetition_penalty", "min_tokens"):
            if getattr(self, name) is not None:
                values[name] = getattr(self, name)
        try:
            return SamplingParams(**values)
        except ValueError as e:
            message = str(e)
            param = "stop" if message.startswith("unknown stop") else message.split(" ", 1)[0]
            param = (aliases or {}).get(param, param) if param in values else None
            raise APIError(400, message, param=param) from None


class CompletionRequest(_SamplingRequest):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_tokens

    def prompt_list(self) -> list[str | list[int]]:
        """The prompts of this request: a string or a token-id list, or a batch of either."""
        prompt = self.prompt
        batch = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)) else [prompt]
        for i, p in enumerate(batch):
            if not p:
                where = f" (prompt {i} of the batch)" if len(batch) > 1 else ""
                raise APIError(400, f"the prompt is empty{where}", param="prompt")
        return batch

    @property
    def echo_only(self) -> bool:
        """echo with max_tokens 0: the prompt (and its logprobs) and nothing generated."""
        return self.echo and self.max_tokens == 0

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        self._check_common()
        if self.suffix:
            raise APIError(400, "suffix is not supported", param="suffix")
        # The engine always generates: echo_only runs one token, and the response leaves it out.
        max_tokens = 1 if self.echo_only else default_max_tokens if self.max_tokens is None else self.max_tokens
        params = self._sampling_params(max_tokens, self.logprobs, structured_output=self._response_format())
        if self.echo and self.logprobs is not None:
            params.prompt_logprobs = self.logprobs
        return params


class ChatCompletionRequest(_SamplingRequest):
    messages: list[dict[str, Any]]
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None

    @property
    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def active_tools(self) -> list[dict] | None:
        """The tools the model is offered (tool_choice "none" offers none)."""
        return self.tools if self.tools and self.tool_choice != "none" else None

    @property
    def template_chars(self) -> int:
        """About how much text the chat template renders: the messages and the offered tools, as written."""
        return sum(len(str(m)) for m in self.messages) + len(str(self.active_tools or ""))

    def _check_tools(self) -> None:
        for i, tool in enumerate(self.tools or []):
            function = tool.get("function")
            if tool.get("type") != "function" or not isinstance(function, dict) or not isinstance(
                    function.get("name"), str) or not function["name"]:
                raise APIError(400, f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ..., "
                                    f"'description': ..., 'parameters': ...}}}}", param="tools")

    def _forced_call(self, token_id: Callable[[str], int | None]) -> StructuredOutput | None:
        """tool_choice "required" (one or more calls) or {"type": "function", "function": {"name": N}} (one
        call of N) as a grammar; None for "auto" and "none"."""
        choice = self.tool_choice
        if choice in (None, "auto", "none"):
            return None
        names = [t["function"]["name"] for t in self.tools or []]
        if choice == "required":
            name = None
        elif isinstance(choice, dict) and choice.get("type") == "function" and isinstance(
                choice.get("function"), dict) and isinstance(choice["function"].get("name"), str):
            name = choice["function"]["name"]
            if name not in names:
                raise APIError(400, f"tool_choice names the function {name!r}, which is not among the tools "
                                    f"({', '.join(names) or 'none given'})", param="tool_choice")
        else:
            raise APIError(400, "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', "
                                "'function': {'name': ...}}", param="tool_choice")
        if not names:
            raise APIError(400, "tool_choice forces a tool call, but the request has no tools", param="tool_choice")
        return _checked(StructuredOutput.tool_call(self.tools, name, token_id), "tools: invalid parameters schema",
                        "tools")

    def sampling_params(self, default_max_tokens: int,
                        token_id: Callable[[str], int | None] = lambda text: None) -> SamplingParams:
        """token_id: the tokenizer's id of a tool-call marker that is one token (a forced call's grammar
        uses it)."""
        self._check_common()
        self._check_tools()
        forced = self._forced_call(token_id)
        structured = self._response_format()
        if forced and structured:
            raise APIError(400, "a forced tool call and a JSON response_format cannot be combined",
                           param="response_format")
        if self.top_logprobs is not None and not self.logprobs:
            raise APIError(400, "top_logprobs needs logprobs to be true", param="top_logprobs")
        requested = self.requested_max_tokens
        aliases = {"logprobs": "top_logprobs"}
        if self.max_completion_tokens is not None:
            aliases["max_tokens"] = "max_completion_tokens"
        return self._sampling_params(default_max_tokens if requested is None else requested,
                                     (self.top_logprobs or 0) if self.logprobs else None, aliases, forced or structured)


def _checked(structured: StructuredOutput, problem: str, param: str) -> StructuredOutput:
    try:
        structured.check()
    except ValueError as e:
        raise APIError(400, f"{problem}: {e}", param=param) from None
    return structured


# ---- response shapes ----------------------------------------------------------------------------

def _finite(x: float) -> float:
    # JSON has no -inf; OpenAI-compatible servers report impossible tokens as -9999.
    return x if math.isfinite(x) else -9999.0


def _ranked(entry: dict[int, Logprob]) -> list[Logprob]:
    return sorted(entry.values(), key=lambda lp: (lp.rank if lp.rank is not None else 1 << 30))


def usage(num_prompt_tokens: int, num_completion_tokens: int, num_cached_tokens: int = 0) -> dict:
    return {"prompt_tokens": num_prompt_tokens, "completion_tokens": num_completion_tokens,
            "total_tokens": num_prompt_tokens + num_completion_tokens,
            "prompt_tokens_details": {"cached_tokens": num_cached_tokens}}


def completion_logprobs(token_ids: list[int], entries: list[dict[int, Logprob]], text_offset: int = 0) -> dict:
    """/v1/completions logprobs: tokens, token_logprobs, top_logprobs (the top-n and the chosen
    token, keyed by token text), text_offset (each token's start within the completion text)."""
    out: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token, entry in zip(token_ids, entries):
        chosen = entry.get(token) or next(iter(entry.values()))
        text = chosen.decoded_token or ""
        out["tokens"].append(text)
        out["token_logprobs"].append(_finite(chosen.logprob))
        out["top_logprobs"].append({lp.decoded_token or "": _finite(lp.logprob) for lp in _ranked(entry)})
        out["text_offset"].append(text_offset)
        text_offset += len(text)
    return out


def echo_logprobs(prompt_ids: list[int], entries: list[dict[int, Logprob] | None], decode) -> dict:
    """The prompt's part of echoed /v1/completions logprobs; its first token has none (null)."""
    first = decode(prompt_ids[0])
    rest = completion_logprobs(prompt_ids[1:], entries[1:], len(first))
    return {"tokens": [first] + rest["tokens"], "token_logprobs": [None] + rest["token_logprobs"],
            "top_logprobs": [None] + rest["top_logprobs"], "text_offset": [0] + rest["text_offset"]}


def joined_logprobs(first: dict, second: dict) -> dict:
    return {key: first[key] + second[key] for key in first}


def chat_logprobs(token_ids: list[int], entries: list[dict[int, Logprob]], top_n: int) -> dict:
    """/v1/chat/completions logprobs: {"content": [{token, logprob, bytes, top_logprobs}]}."""
    def item(lp: Logprob) -> dict:
        text = lp.decoded_token or ""
        return {"token": text, "logprob": _finite(lp.logprob), "bytes": list(text.encode("utf-8"))}

    content = []
    for token, entry in zip(token_ids, entries):
        chosen = entry.get(token) or next(iter(entry.values()))
        top = [item(lp) for lp in _ranked(entry) if lp.rank is not None and lp.rank <= top_n][:top_n]
        content.append({**item(chosen), "top_logprobs": top})
    return {"content": content, "refusal": None}
