"""Tokenizer of a Hugging Face model directory, without transformers.

tokenizer.json is run by the `tokenizers` library; tokenizer_config.json supplies the BOS/EOS
tokens, add_bos_token and the chat template (rendered with a sandboxed jinja2 environment, as
transformers does); generation_config.json, when present, may add more EOS ids.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tokenizers
from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from mtpserve import tool_calls

ROLES = ("system", "user", "assistant", "tool")


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json writes special tokens as a string or as {"content": ...}."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise ValueError(f"unrecognised special token entry {value!r} in tokenizer_config.json")


def _pick_template(value: Any) -> str | None:
    """chat_template is a string, or a list of {"name", "template"} of which "default" is used."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        return named.get("default")
    raise ValueError(f"unrecognised chat_template of type {type(value).__name__} in tokenizer_config.json")


def _raise_exception(message: str):
    raise TemplateError(message)


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        value = json.load(f)
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got a JSON {type(value).__name__}")
    return value


class Tokenizer:
    def __init__(self, tokenizer: tokenizers.Tokenizer, config: dict, generation_config: dict | None = None):
        self._tok = tokenizer
        self.bos_token = _token_content(config.get("bos_token"))
        self.eos_token = _token_content(config.get("eos_token"))
        self.add_bos_token = bool(config.get("add_bos_token", False))
        self.chat_template = _pick_template(config.get("chat_template"))
        self._bos_id = self._id_of(self.bos_token)
        eos_ids = [] if self.eos_token is None else [self._id_of(self.eos_token)]
        gen_eos = (generation_config or {}).get("eos_token_id")
        if isinstance(gen_eos, int):
            gen_eos = [gen_eos]
        for i in gen_eos or []:
            if i not in eos_ids:
                eos_ids.append(int(i))
        self._eos_ids = eos_ids
        # Whether tokenizer.json's post-processor already inserts BOS: then encode() must not add it again.
        probe = self._tok.encode("a", add_special_tokens=True).ids
        self._post_processor_adds_bos = self._bos_id is not None and probe[:1] == [self._bos_id]
        self._template = None

    @classmethod
    def from_dir(cls, model_dir) -> "Tokenizer":
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise FileNotFoundError(f"model directory {str(model_dir)!r} does not exist")
        files = {}
        for name in ("tokenizer.json", "tokenizer_config.json"):
            files[name] = model_dir / name
            if not files[name].is_file():
                raise FileNotFoundError(f"{name} not found in model directory {str(model_dir)!r}")
        gen_path = model_dir / "generation_config.json"
        try:
            tok = tokenizers.Tokenizer.from_file(str(files["tokenizer.json"]))
        except Exception as e:  # tokenizers raises its own exception types for a corrupt file
            raise ValueError(f"{files['tokenizer.json']} is not a valid tokenizer file: {e}") from None
        return cls(tok,
                   _read_json(files["tokenizer_config.json"]),
                   _read_json(gen_path) if gen_path.is_file() else None)

    def _id_of(self, token: str | None) -> int | None:
        if token is None:
            return None
        token_id = self._tok.token_to_id(token)
        if token_id is None:
            raise ValueError(f"special token {token!r} from tokenizer_config.json is not in tokenizer.json's vocabulary")
        return token_id

    # ---- encode / decode ----------------------------------------------------------------------

    def encode(self, text: str, add_special_tokens: bool = True, release_gil: bool = False) -> list[int]:
        """release_gil: let go of the GIL while the text is encoded, for a thread beside an event loop. The
        tokenizers library's encode holds it throughout, so a long prompt would stall the loop as much as if it
        were encoded there; its encode_batch (of this one text) releases it."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, got {type(text).__name__}")
        if release_gil:
            ids = self._tok.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids
        else:
            ids = self._tok.encode(text, add_special_tokens=add_special_tokens).ids
        if add_special_tokens and self._bos_id is not None:
            bos = self._bos_id
            if self.add_bos_token and not self._post_processor_adds_bos and ids[:1] != [bos]:
                ids = [bos] + ids
            elif ids[:2] == [bos, bos]:  # the text began with BOS and the post-processor added another
                ids = ids[1:]
        return ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def to_json(self) -> str:
        """The tokenizers JSON of the vocabulary (what the grammar library builds its token trie from)."""
        return self._tok.to_str()

    def token_id(self, text: str) -> int | None:
        """The id of `text` when the vocabulary has it as one token."""
        return self._tok.token_to_id(text)

    def id_to_token(self, token_id: int) -> str | None:
        return self._tok.id_to_token(token_id)

    # ---- chat template ------------------------------------------------------------------------

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, **kwargs) -> str:
        """Render a conversation into prompt text. The text already holds BOS when the template
        writes it, so encode it with add_special_tokens=False. Tools, tool calls and tool results
        use DeepSeek-V3's format (mtpserve.tool_calls) unless the model's template handles them."""
        if self.chat_template is None:
            raise ValueError("this model has no chat_template in tokenizer_config.json; pass a plain prompt instead")
        messages = _validate_messages(messages)
        uses_tools = tools or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
        if uses_tools and "tool" not in self.chat_template:  # a template that knows no tools
            return tool_calls.render_conversation(messages, tools, self.bos_token or "", self.eos_token or "",
                                                  add_generation_prompt)
        if tools:
            kwargs["tools"] = tools
        if self._template is None:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.globals["raise_exception"] = _raise_exception
            self._template = env.from_string(self.chat_template)
        return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                     bos_token=self.bos_token or "", eos_token=self.eos_token or "", **kwargs)

    # ---- properties ---------------------------------------------------------------------------

    @property
    def bos_token_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_token_id(self) -> int | None:
        return self._eos_ids[0] if self._eos_ids else None

    @property
    def eos_token_ids(self) -> list[int]:
        """eos_token's id first, then any others generation_config.json lists."""
        return list(self._eos_ids)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def max_chars_per_token(self) -> int | None:
        """An upper bound on the characters of text one token can stand for, or None when the
        tokenizer gives none (a normalizer may drop characters; WordPiece's [UNK] covers a word).
        With it, a text longer than max_model_len * bound cannot fit, untokenized."""
        if getattr(self, "_max_chars", 0) == 0:
            bound = None
            model = type(self._tok.model).__name__
            if self._tok.normalizer is None and model == "BPE" and not getattr(self._tok.model, "fuse_unk", False):
                # Byte-level vocabularies write one character per byte, others one per character,
                # so a token's vocabulary string is at least as long as the text it covers (fused
                # unknown characters would break that).
                bound = max((len(t) for t in self._tok.get_vocab(with_added_tokens=True)), default=1)
            self._max_chars = bound
        return self._max_chars

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(i for i, t in self._tok.get_added_tokens_decoder().items() if t.special)


def _validate_messages(messages) -> list[dict]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"messages[{i}] must be a dict, got {type(m).__name__}")
        role, content = m.get("role"), m.get("content")
        if content is None and role == "assistant" and m.get("tool_calls"):
            content = ""  # a turn of tool calls only
        if role not in ROLES:
            raise ValueError(f"messages[{i}] has role {role!r}; expected one of {', '.join(ROLES)}")
        if isinstance(content, list):  # OpenAI-style content parts: only text parts are supported
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise ValueError(f"messages[{i}].content parts must all be {{'type': 'text', 'text': str}}")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content must be a string, got {type(content).__name__}")
        out.append({**m, "content": content})
    return out
