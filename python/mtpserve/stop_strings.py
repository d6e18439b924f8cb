"""Stop strings over incrementally growing output text (vLLM semantics).

The output is cut just before the stop string (or just after it with
include_stop_str_in_output), and the token whose text completed the stop is the last output
token. To get that token exactly when a step emits several tokens (MTP), feed the tokens to the
detokenizer one at a time and call `check` after each: the first token that returns a match ends
the request, just as it would without speculation.
"""
from __future__ import annotations


class StopStringMatcher:
    def __init__(self, stops: list[str], include_stop_str_in_output: bool = False):
        if isinstance(stops, str) or not all(isinstance(s, str) and s for s in stops):
            raise ValueError(f"stop strings must be a list of non-empty strings, got {stops!r}")
        self.stops = list(stops)
        self.include_stop_str_in_output = include_stop_str_in_output
        self.max_stop_len = max((len(s) for s in self.stops), default=0)

    def check(self, text_so_far: str, new_text_len: int) -> tuple[str | None, str]:
        """Look for a stop string that ends inside the last `new_text_len` characters of
        `text_so_far` (it may start in the earlier text). Returns (stop, truncated text) for the
        occurrence that completes first — the one a character-by-character run would see first —
        or (None, text_so_far)."""
        if new_text_len <= 0 or not self.stops:
            return None, text_so_far
        old_len = len(text_so_far) - new_text_len
        best = None  # (end, start, stop)
        for stop in self.stops:
            # Only occurrences ending after old_len are new; earlier ones were checked before.
            start = text_so_far.find(stop, max(old_len - len(stop) + 1, 0))
            if start != -1:
                candidate = (start + len(stop), start, stop)
                best = candidate if best is None else min(best, candidate)
        if best is None:
            return None, text_so_far
        end, start, stop = best
        return stop, text_so_far[:end if self.include_stop_str_in_output else start]

    def safe_len(self, text: str) -> int:
        """How many leading characters of `text` can be streamed now: a suffix that could still
        grow into a stop string (at most max_stop_len - 1 characters) is held back."""
        for n in range(min(self.max_stop_len - 1, len(text)), 0, -1):
            tail = text[-n:]
            if any(stop.startswith(tail) for stop in self.stops):
                return len(text) - n
        return len(text)
