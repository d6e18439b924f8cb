"""Benchmark prompts: ShareGPT conversations and random token sequences, as vLLM's bench_serving samples them.

Lengths are counted in tokens of the served model's tokenizer, without special tokens: the server may add
BOS or a chat template on top (its own count comes back in ``usage.prompt_tokens``).
"""
from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SHAREGPT_SPLITS = ("all", "held-out", "train")


@dataclass
class SampleRequest:
    prompt: str
    prompt_len: int  # tokens of `prompt` (add_special_tokens=False)
    expected_output_len: int  # sent as max_tokens
    source_id: str | None = None  # ShareGPT record id


def load_tokenizer(tokenizer_dir: str | os.PathLike | None = None, model: str | None = None):
    """The served model's tokenizer: ``tokenizer_dir``, else ``model`` when it names a local directory,
    else the embedded model (mtpserve.engine_args.DEFAULT_MODEL)."""
    from mtpserve.engine_args import DEFAULT_MODEL
    from mtpserve.tokenizer import Tokenizer

    if tokenizer_dir is None:
        tokenizer_dir = model if model is not None and Path(model).is_dir() else DEFAULT_MODEL
    return Tokenizer.from_dir(tokenizer_dir)


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _pad_token(tokenizer) -> int | None:
    """A token that stays one token when repeated after any text (a short ASCII word with a leading space)."""
    for word in (" the", " a", " x", " 0", " ."):
        ids = _encode(tokenizer, word)
        if len(ids) == 1 and _encode(tokenizer, "a." + word * 3)[-3:] == ids * 3:
            return ids[0]
    return None


def fit_to_length(tokenizer, ids: list[int], length: int, filler: list[int] | None = None,
                  max_rounds: int = 16) -> tuple[str, int]:
    """Text whose re-encoding is ``length`` tokens, starting from token ids ``ids``.

    Ids are truncated, or padded by cycling ``filler`` (default: ``ids`` themselves), then decoded; decoding and
    re-encoding need not round-trip (BPE merges across the cut, a character cut in two), so this drops a trailing
    broken character and repeats on the re-encoded ids until the count is exact; the later rounds pad with a
    plain word token instead of the filler. Returns (text, token count), the count exact unless it never settled.
    """
    if length <= 0:
        raise ValueError(f"length must be positive, got {length}")
    filler = list(filler or ids)
    if not filler:
        raise ValueError("cannot pad an empty token sequence")
    pad = None
    ids = list(ids)
    for r in range(max_rounds):
        if len(ids) < length:
            if r >= 4 and pad is None:
                pad = _pad_token(tokenizer)
            if r >= 4 and pad is not None:
                ids = ids + [pad] * (length - len(ids))
            else:  # each round pads from another point of the filler, so a cut cannot cycle
                ids = ids + [filler[(r + i) % len(filler)] for i in range(length - len(ids))]
        ids = ids[:length]
        text = tokenizer.decode(ids).rstrip("\ufffd")  # a cut inside a UTF-8 character decodes to U+FFFD
        ids = _encode(tokenizer, text)
        if len(ids) == length:
            return text, length
    return text, len(ids)


# ---- ShareGPT -----------------------------------------------------------------------------------------------


def load_sharegpt_pairs(path: str | os.PathLike | None = None, split: str = "all") -> list[tuple[str, str, str]]:
    """(record id, first turn, second turn) of every record with at least two turns, in file order.

    As vLLM, the first turn is the prompt and the second the reference completion, whoever wrote them.
    ``split`` picks records by mtpserve.sharegpt.is_held_out: "held-out" is what the embedded tiny model was
    never trained on (use it to benchmark that model), "train" the rest.
    """
    from mtpserve.sharegpt import is_held_out, iter_records

    if split not in SHAREGPT_SPLITS:
        raise ValueError(f"sharegpt split must be one of {', '.join(SHAREGPT_SPLITS)}, got {split!r}")
    pairs = []
    for rec in iter_records(path):
        turns = rec["conversations"]
        if len(turns) < 2:
            continue
        if split != "all" and is_held_out(rec["id"]) != (split == "held-out"):
            continue
        pairs.append((rec["id"], str(turns[0].get("value") or ""), str(turns[1].get("value") or "")))
    return pairs


def sharegpt_filter(prompt_len: int, output_len: int, *, input_fixed: bool = False, output_fixed: bool = False,
                    min_len: int = 4, max_prompt_len: int | None = 1024,
                    max_total_len: int | None = 2048) -> str | None:
    """vLLM's filter on a (natural prompt length, natural reference length) pair: the reason to skip it, or None.

    A fixed output length waives the output minimum (as in vLLM); a fixed input length waives the prompt maximum;
    a fixed length of either kind waives the total maximum (a 2500-in/1500-out run asks for long sequences).
    """
    if prompt_len < min_len:
        return "prompt_too_short"
    if not output_fixed and output_len < min_len:
        return "output_too_short"
    if not input_fixed and max_prompt_len is not None and prompt_len > max_prompt_len:
        return "prompt_too_long"
    if not (input_fixed or output_fixed) and max_total_len is not None and prompt_len + output_len > max_total_len:
        return "total_too_long"
    return None


def sample_sharegpt_requests(tokenizer, num_requests: int, *, path: str | os.PathLike | None = None, seed: int = 0,
                             input_len: int | None = None, output_len: int | None = None, min_len: int = 4,
                             max_prompt_len: int | None = 1024, max_total_len: int | None = 2048,
                             split: str = "all", stats: dict | None = None,
                             pairs: list[tuple[str, str, str]] | None = None) -> list[SampleRequest]:
    """vLLM's sample_sharegpt_requests: shuffle the two-turn pairs with ``seed``, walk them in that order, drop
    those ``sharegpt_filter`` rejects, keep the first ``num_requests``.

    ``input_len`` truncates or pads (by repeating its own tokens) each prompt to exactly that many tokens;
    ``output_len`` replaces the reference completion's length. ``stats``, when given, receives the counts of
    pairs looked at, kept and dropped per reason. ``pairs`` skips reading the file (from load_sharegpt_pairs).
    """
    if num_requests <= 0:
        raise ValueError(f"num_requests must be positive, got {num_requests}")
    for name, value in (("input_len", input_len), ("output_len", output_len)):
        if value is not None and value <= 0:
            raise ValueError(f"sharegpt {name} must be positive, got {value}")
    pairs = list(load_sharegpt_pairs(path, split) if pairs is None else pairs)
    random.Random(seed).shuffle(pairs)
    counts = {"seen": 0, "kept": 0}
    out: list[SampleRequest] = []
    for rec_id, prompt, completion in pairs:
        if len(out) == num_requests:
            break
        counts["seen"] += 1
        prompt_ids = _encode(tokenizer, prompt)
        ref_len = len(_encode(tokenizer, completion)) if output_len is None else output_len
        reason = sharegpt_filter(len(prompt_ids), ref_len, input_fixed=input_len is not None,
                                 output_fixed=output_len is not None, min_len=min_len,
                                 max_prompt_len=max_prompt_len, max_total_len=max_total_len)
        if reason is not None:
            counts[reason] = counts.get(reason, 0) + 1
            continue
        if input_len is not None:
            prompt, prompt_len = fit_to_length(tokenizer, prompt_ids, input_len)
        else:
            prompt_len = len(prompt_ids)
        out.append(SampleRequest(prompt, prompt_len, ref_len, rec_id))
    counts["kept"] = len(out)
    if stats is not None:
        stats.update(counts)
    if not out:
        raise ValueError(f"no ShareGPT conversation passes the filters ({counts})")
    if len(out) < num_requests:
        # vLLM oversamples the same way; say so, since repeated prompts can hit the prefix cache
        print(f"mtpserve bench: only {len(out)} ShareGPT conversations pass the filters; repeating them to make "
              f"{num_requests} requests", file=sys.stderr)
        rng = random.Random(seed + 1)
        out += [rng.choice(out[:counts["kept"]]) for _ in range(num_requests - len(out))]
    return out


# ---- random ------------------------------------------------------------------------------------------------


def length_range(length: int, range_ratio: float) -> tuple[int, int]:
    """Inclusive bounds of lengths drawn around ``length``: [length*(1-r), length*(1+r)], at least 1."""
    if length <= 0:
        raise ValueError(f"length must be positive, got {length}")
    if not 0 <= range_ratio < 1:
        raise ValueError(f"random range ratio must be in [0, 1), got {range_ratio}")
    return max(1, int(length * (1 - range_ratio))), int(length * (1 + range_ratio))


def sample_random_requests(tokenizer, num_requests: int, *, input_len: int = 1024, output_len: int = 128,
                           range_ratio: float = 0.0, seed: int = 0) -> list[SampleRequest]:
    """Prompts of uniformly random non-special token ids, lengths uniform in ``length_range`` (as vLLM's
    RandomDataset); the text is decoded from the ids and adjusted until it re-encodes to the drawn length."""
    if num_requests <= 0:
        raise ValueError(f"num_requests must be positive, got {num_requests}")
    in_lo, in_hi = length_range(input_len, range_ratio)
    out_lo, out_hi = length_range(output_len, range_ratio)
    rng = np.random.default_rng(seed)
    input_lens = rng.integers(in_lo, in_hi + 1, size=num_requests)
    output_lens = rng.integers(out_lo, out_hi + 1, size=num_requests)
    special = set(tokenizer.all_special_ids)
    allowed = np.array([i for i in range(tokenizer.vocab_size) if i not in special], dtype=np.int64)
    out = []
    for n_in, n_out in zip(input_lens.tolist(), output_lens.tolist()):
        ids = allowed[rng.integers(0, len(allowed), size=n_in)].tolist()
        filler = allowed[rng.integers(0, len(allowed), size=max(n_in, 16))].tolist()
        text, n = fit_to_length(tokenizer, ids, n_in, filler=filler)
        out.append(SampleRequest(text, n, n_out))
    return out
