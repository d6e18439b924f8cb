"""Structured output: the grammar a request's output must follow (a JSON schema, any JSON object, or a
call of the offered tools in DeepSeek-V3's format), and the engine's token masker that holds every
sampled row to it, each MTP verify row included (cpp/core/token_constraint.h).

Grammars are llguidance's (MIT, a Rust core with no torch dependency and a 3 MB wheel): it computes a
token mask in tens of microseconds with no per-grammar vocabulary precompute, compiles a JSON schema
in well under a millisecond, takes JSON Schema and Lark grammars (with JSON schemas inside them, which
forced tool calls need), and computes the masks of a request's verify rows in one call, advancing
through its drafts and rolling them back."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import llguidance
import numpy as np

from mtpserve import tool_calls

# Compact JSON (no whitespace between tokens): a model that has not learnt to stop writing
# whitespace cannot pad its output up to max_tokens.
_JSON_OPTIONS = {"whitespace_flexible": False}
# A call's arguments sit in a fenced JSON block between the name and the call's end marker.
_FENCE_BEGIN, _FENCE_END = "\n```json\n", "\n```"
_MAX_COMPILED = 64  # grammars kept compiled; a request copies its grammar's matcher


def _text(text: str) -> str:
    """A Lark string literal."""
    return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class StructuredOutput:
    grammar: str  # llguidance's grammar text
    kind: str  # what the request asked for, for messages: "json_schema", "json_object", "tool_call"

    @classmethod
    def json_schema(cls, schema: dict) -> StructuredOutput:
        return cls(llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=_JSON_OPTIONS), "json_schema")

    @classmethod
    def json_object(cls) -> StructuredOutput:
        return cls(llguidance.LLMatcher.grammar_from_json_schema({"type": "object"}, overrides=_JSON_OPTIONS),
                   "json_object")

    @classmethod
    def tool_call(cls, tools: list[dict], name: str | None = None,
                  token_id: Callable[[str], int | None] = lambda text: None) -> StructuredOutput:
        """One call of tool `name`, or one or more calls of any of `tools` (name None), in DeepSeek-V3's
        format. token_id(marker): the marker's id where the tokenizer has it as one token."""
        def literal(text: str) -> str:
            token = token_id(text)
            return f"<[{token}]>" if token is not None else _text(text)

        chosen = [t["function"] for t in tools if name is None or t["function"]["name"] == name]
        rules = [f"start: {literal(tool_calls.CALLS_BEGIN)} call{'' if name else '+'} {literal(tool_calls.CALLS_END)}",
                 "call: " + " | ".join(f"call_{i}" for i in range(len(chosen)))]
        begin = f"{literal(tool_calls.CALL_BEGIN)} {_text('function')} {literal(tool_calls.SEP)}"
        end = f"{_text(_FENCE_END)} {literal(tool_calls.CALL_END)}"
        for i, function in enumerate(chosen):
            schema = {**(function.get("parameters") or {"type": "object"}), "x-guidance": _JSON_OPTIONS}
            rules += [f"call_{i}: {begin} {_text(function['name'] + _FENCE_BEGIN)} args_{i} {end}",
                      f"args_{i}: %json {json.dumps(schema)}"]
        return cls(llguidance.LLMatcher.grammar_from_lark("\n".join(rules)), "tool_call")

    def check(self) -> None:
        """Raises ValueError with llguidance's message when the grammar (the schema) is not valid."""
        error = llguidance.LLMatcher.validate_grammar(self.grammar)
        if error:
            raise ValueError(error.strip())


class _RequestGrammar:
    """One request's matcher, and how many of its output tokens it has consumed."""

    def __init__(self, matcher: llguidance.LLMatcher):
        self.matcher = matcher
        self.seen = 0

    def catch_up(self, outputs: memoryview) -> None:
        for token in outputs[self.seen:].tolist():
            if self.matcher.is_stopped():
                break  # the grammar is complete: only EOS was allowed, and tokens after it change nothing
            self.matcher.consume_token(token)
        self.seen = len(outputs)


class GrammarMasker:
    """Compiles grammars for one tokenizer and fills the engine's masks (EngineConfig.token_masker):
    a request's rows are the masks after its outputs and after each of its drafts in turn."""

    def __init__(self, tokenizer_json: str, vocab_size: int, eos_token_ids: list[int]):
        self._tokenizer = llguidance.LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=list(eos_token_ids))
        self._executor = llguidance.LLExecutor()
        eos_only = np.zeros((vocab_size + 31) // 32, dtype=np.uint32)
        eos_only[eos_token_ids[0] // 32] = 1 << (eos_token_ids[0] % 32)
        self._eos_only = eos_only.view(np.int32)
        self._compiled: OrderedDict[str, llguidance.LLMatcher] = OrderedDict()
        self._lock = threading.Lock()  # constraint() may be called from any frontend thread

    def constraint(self, structured: StructuredOutput):
        """A fresh grammar state for one request (mtpserve._C.TokenConstraint); ValueError for a grammar
        llguidance refuses."""
        from mtpserve import _C

        with self._lock:
            compiled = self._compiled.get(structured.grammar)
            if compiled is None:
                compiled = llguidance.LLMatcher(self._tokenizer, structured.grammar, log_level=0)
                if compiled.is_error():
                    raise ValueError(f"invalid {structured.kind}: {compiled.get_error()}")
                self._compiled[structured.grammar] = compiled
                if len(self._compiled) > _MAX_COMPILED:
                    self._compiled.popitem(last=False)
            self._compiled.move_to_end(structured.grammar)
            return _C.TokenConstraint(_RequestGrammar(compiled.deep_copy()))

    def fill(self, queries: list, masks: memoryview) -> None:
        """The engine's callback: queries are (state, outputs, drafts, first_row) per request."""
        rows = np.asarray(masks)
        plain, verify = [], []  # llguidance takes rows with drafts and rows without in separate calls
        for state, outputs, drafts, first_row in queries:
            state.catch_up(outputs)
            if state.matcher.is_error():
                rows[first_row:first_row + len(drafts) + 1] = self._eos_only  # a broken grammar ends the output
            elif drafts:
                verify.append((state.matcher, first_row, drafts))
            else:
                plain.append((state.matcher, first_row))
        shape = (rows.ctypes.data, rows.shape[1] * 4, rows.shape[0])
        if plain:
            self._executor.unsafe_compute_mask_ptr(plain, *shape)
        if verify:
            self._executor.unsafe_compute_mask_ptr_with_draft_token(verify, *shape)

    def revise_drafts(self, revisions: list) -> list[list[int]]:
        """The engine's callback after drafting: revisions are (state, outputs, drafts) per request. Each
        request keeps its drafts while the grammar allows them and forces nothing else, and from there
        drafts what the grammar forces (a key, a separator, a closing bracket) in its own tokenization,
        which the target then accepts but where it splits the same bytes differently."""
        return [self._revised(state, outputs, drafts) for state, outputs, drafts in revisions]

    @staticmethod
    def _revised(state: _RequestGrammar, outputs: memoryview, drafts: list[int]) -> list[int]:
        state.catch_up(outputs)
        matcher = state.matcher
        if matcher.is_error() or matcher.is_stopped():
            return drafts
        kept = 0
        forced = matcher.compute_ff_tokens()
        while (kept < len(drafts) and (not forced or forced[0] == drafts[kept])
               and matcher.try_consume_tokens(drafts[kept:kept + 1])):  # try_: a refused token is no error
            kept += 1
            forced = matcher.compute_ff_tokens()
        matcher.rollback(kept)
        return drafts[:kept] + forced[:len(drafts) - kept]
