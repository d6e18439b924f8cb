import json
import re

import pytest
from jinja2 import TemplateError

from mtpserve.tokenizer import Tokenizer
from tiny_tokenizer import BOS, CORPUS, EOS, write_tiny_tokenizer


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    return write_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="module")
def tok(tok_dir):
    return Tokenizer.from_dir(tok_dir)


def test_special_ids_and_sizes(tok):
    assert (tok.bos_token, tok.eos_token) == (BOS, EOS)
    assert (tok.bos_token_id, tok.eos_token_id) == (0, 1)
    assert tok.all_special_ids == [0, 1, 2, 3]
    assert tok.vocab_size == 400


def test_round_trip_multilingual(tok):
    for line in CORPUS.splitlines() + ["unseen words: zebra 🦓 鯨 ∮"]:
        ids = tok.encode(line)
        assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
        assert tok.decode(ids) == line
        assert tok.encode(line, add_special_tokens=False) == ids[1:]


def test_decode_can_keep_special_tokens(tok):
    ids = tok.encode("hi") + [tok.eos_token_id]
    assert tok.decode(ids) == "hi"
    assert tok.decode(ids, skip_special_tokens=False) == f"{BOS}hi{EOS}"


@pytest.mark.parametrize("post_processor", [False, True])
def test_bos_is_never_doubled(tmp_path, post_processor):
    tok = Tokenizer.from_dir(write_tiny_tokenizer(tmp_path, bos_post_processor=post_processor))
    assert tok.encode("hello")[:2] == [0, tok.encode("hello", add_special_tokens=False)[0]]
    assert tok.encode(f"{BOS}hello").count(0) == 1  # text that already starts with BOS


@pytest.mark.parametrize("config", [{}, {"bos_post_processor": True}, {"add_bos_token": False}])
def test_encoding_without_the_gil_gives_the_same_ids(tmp_path, config):
    tok = Tokenizer.from_dir(write_tiny_tokenizer(tmp_path, **config))
    for text in CORPUS.splitlines() + [f"{BOS}hello", "", "zebra 🦓 鯨 ∮ " * 50]:
        for special in (True, False):
            assert tok.encode(text, special, release_gil=True) == tok.encode(text, special)


def test_add_bos_token_false(tmp_path):
    tok = Tokenizer.from_dir(write_tiny_tokenizer(tmp_path, add_bos_token=False))
    assert tok.encode("hello") == tok.encode("hello", add_special_tokens=False)
    assert 0 not in tok.encode("hello")


def test_generation_config_adds_eos_ids(tmp_path):
    tok = Tokenizer.from_dir(write_tiny_tokenizer(tmp_path, generation_eos_ids=[3, 1]))
    assert tok.eos_token_id == 1
    assert tok.eos_token_ids == [1, 3]


def test_chat_template(tok):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "你好"}]
    expected = f"{BOS}Be brief.<｜User｜>Hi<｜Assistant｜>Hello!{EOS}<｜User｜>你好<｜Assistant｜>"
    assert tok.apply_chat_template(messages) == expected
    assert tok.apply_chat_template(messages, add_generation_prompt=False) == expected[:-len("<｜Assistant｜>")]
    # OpenAI-style text parts are joined; the special tokens in the text encode as single ids.
    parts = [{"role": "user", "content": [{"type": "text", "text": "H"}, {"type": "text", "text": "i"}]}]
    ids = tok.encode(tok.apply_chat_template(parts), add_special_tokens=False)
    assert ids[0] == 0 and ids[1] == 2 and ids[-1] == 3 and tok.decode(ids) == "Hi"


@pytest.mark.parametrize("messages, match", [
    ([], "non-empty list"),
    ("hello", "non-empty list"),
    (["hello"], r"messages\[0\] must be a dict"),
    ([{"role": "robot", "content": "x"}], r"messages\[0\] has role 'robot'"),
    ([{"role": "user"}], r"messages\[0\].content must be a string"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": 3}], r"messages\[1\].content"),
    ([{"role": "user", "content": [{"type": "image_url"}]}], "parts"),
])
def test_chat_template_rejects_bad_messages(tok, messages, match):
    with pytest.raises(ValueError, match=match):
        tok.apply_chat_template(messages)


def test_chat_template_list_form_and_raise_exception(tmp_path):
    d = write_tiny_tokenizer(tmp_path)
    config = json.loads((d / "tokenizer_config.json").read_text())
    config["chat_template"] = [
        {"name": "tool_use", "template": "unused"},
        {"name": "default", "template": "{% for m in messages %}\n  {% if m.role == 'tool' %}"
                                        "{{ raise_exception('no tools here') }}{% endif %}\n"
                                        "[{{ m.content }}]\n{% endfor %}{{ eos_token }}"},
    ]
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    tok = Tokenizer.from_dir(d)
    # trim_blocks / lstrip_blocks remove the newlines and indentation around block tags.
    assert tok.apply_chat_template([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) \
        == f"[a]\n[b]\n{EOS}"
    with pytest.raises(TemplateError, match="no tools here"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])


def test_no_chat_template(tmp_path):
    d = write_tiny_tokenizer(tmp_path)
    config = json.loads((d / "tokenizer_config.json").read_text())
    del config["chat_template"]
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="no chat_template in tokenizer_config.json"):
        Tokenizer.from_dir(d).apply_chat_template([{"role": "user", "content": "x"}])


def test_sandbox_blocks_unsafe_templates(tmp_path):
    d = write_tiny_tokenizer(tmp_path)
    config = json.loads((d / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{ messages.__class__.__mro__ }}"
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match="unsafe|not safely|access"):
        Tokenizer.from_dir(d).apply_chat_template([{"role": "user", "content": "x"}])


@pytest.mark.parametrize("missing", ["tokenizer.json", "tokenizer_config.json"])
def test_missing_files_are_named(tmp_path, missing):
    d = write_tiny_tokenizer(tmp_path)
    (d / missing).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(f"{missing} not found in model directory {str(d)!r}")):
        Tokenizer.from_dir(d)


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Tokenizer.from_dir(tmp_path / "nope")



def test_matches_transformers(tok_dir, tok):
    # transformers renders the same template and runs the same tokenizer.json: same text, same ids.
    # (Its BOS handling for this ByteLevel file differs by version, so ids are compared without it.)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tok_dir))
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi 👋"},
                {"role": "assistant", "content": "yo"}, {"role": "user", "content": "狐狸?"}]
    for gen in (True, False):
        assert tok.apply_chat_template(messages, add_generation_prompt=gen) == \
            hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
    for line in CORPUS.splitlines():
        assert tok.encode(line, add_special_tokens=False) == hf.encode(line, add_special_tokens=False)
