"""Incremental detokenization of a growing list of output tokens.

Byte-level BPE tokens can end in the middle of a multi-byte UTF-8 character; decoding such a
prefix yields U+FFFD. As in vLLM, we decode a small window of tokens twice — up to `read_offset`
(already emitted) and to the end — and emit the difference only once it no longer ends in
U+FFFD. Decoding a window instead of the whole sequence keeps each step O(window), and starting
the window a few prompt tokens back gives tokenizers that strip a leading space (SentencePiece)
the context they need.
"""
from __future__ import annotations

# How many prompt tokens of context the first window starts with (vLLM's value).
PROMPT_CONTEXT_TOKENS = 5
REPLACEMENT_CHAR = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer, prompt_token_ids, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self._ids = list(prompt_token_ids)
        self._num_prompt = len(self._ids)
        self.text = ""  # all output text emitted so far
        self.prefix_offset = max(self._num_prompt - PROMPT_CONTEXT_TOKENS, 0)
        self.read_offset = self._num_prompt
        # Context that ends inside a character would merge its bytes with the output's: drop it.
        if self._decode(self.prefix_offset, self.read_offset).endswith(REPLACEMENT_CHAR):
            self.prefix_offset = self.read_offset

    @property
    def output_token_ids(self) -> list[int]:
        return self._ids[self._num_prompt:]

    def _decode(self, start: int, end: int | None = None) -> str:
        return self.tokenizer.decode(self._ids[start:end], skip_special_tokens=self.skip_special_tokens)

    def _emit(self, force: bool) -> str:
        prefix_text = self._decode(self.prefix_offset, self.read_offset)
        full_text = self._decode(self.prefix_offset)
        # Nothing new (e.g. a skipped special token), or a character still incomplete: hold back.
        if len(full_text) <= len(prefix_text) or (full_text.endswith(REPLACEMENT_CHAR) and not force):
            return ""
        new_text = full_text[len(prefix_text):]
        self.prefix_offset, self.read_offset = self.read_offset, len(self._ids)
        self.text += new_text
        return new_text

    def add(self, new_token_ids) -> str:
        """Append tokens (one or several, as an MTP step emits) and return the newly completed text."""
        self._ids.extend(new_token_ids)
        return self._emit(force=False)

    def flush(self) -> str:
        """At the end of a request: emit text held back for an incomplete character (as U+FFFD)."""
        return self._emit(force=True)
