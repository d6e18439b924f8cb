import random

import pytest

from mtpserve.detokenizer import IncrementalDetokenizer
from mtpserve.tokenizer import Tokenizer
from tiny_tokenizer import CORPUS, write_tiny_tokenizer

PIECES = ["😀", "🚀", "👍🏽", "👨‍👩‍👧‍👦", "敏捷", "狐狸", "你好", "世界", "こんにちは", "안녕", "∑∫", "€", "ß", "é",
          " the", " fox", " token", "!", "\n", " ", "x"]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer.from_dir(write_tiny_tokenizer(tmp_path_factory.mktemp("tok")))


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(n))


def feed(detok: IncrementalDetokenizer, ids: list[int], rng: random.Random, max_chunk: int) -> list[str]:
    """Feed ids in random chunks of 1..max_chunk tokens, as MTP steps of different acceptance do."""
    outs, i = [], 0
    while i < len(ids):
        n = rng.randint(1, max_chunk)
        outs.append(detok.add(ids[i:i + n]))
        i += n
    return outs


def test_multibyte_characters_are_really_split(tok):
    # Guards the other tests: the tiny vocabulary must split characters across tokens.
    ids = tok.encode("👨‍👩‍👧‍👦 狐狸", add_special_tokens=False)
    assert any("\ufffd" in tok.decode([i]) for i in ids)


@pytest.mark.parametrize("max_chunk", [1, 3, 6])
def test_concatenation_equals_decode(tok, max_chunk):
    rng = random.Random(max_chunk)
    for _ in range(50):
        prompt = tok.encode(random_text(rng, rng.randint(0, 8)))
        out_ids = tok.encode(random_text(rng, rng.randint(1, 30)), add_special_tokens=False)
        detok = IncrementalDetokenizer(tok, prompt)
        outs = feed(detok, out_ids, rng, max_chunk)
        assert "".join(outs) == detok.text == tok.decode(out_ids)
        assert not any(s.endswith("\ufffd") for s in outs)  # incomplete characters were held back
        assert detok.output_token_ids == out_ids
        assert detok.flush() == ""


@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_arbitrary_token_sequences(tok, skip_special_tokens):
    # Any ids at all, special tokens and stray continuation bytes included; the prompt may itself
    # end inside a character. Text left incomplete at the end comes out on flush().
    rng = random.Random(int(skip_special_tokens))
    for _ in range(200):
        prompt = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(0, 7))]
        out_ids = [rng.randrange(tok.vocab_size) for _ in range(rng.randint(1, 25))]
        detok = IncrementalDetokenizer(tok, prompt, skip_special_tokens=skip_special_tokens)
        text = "".join(feed(detok, out_ids, rng, 4)) + detok.flush()
        assert text == detok.text == tok.decode(out_ids, skip_special_tokens=skip_special_tokens)


def test_text_held_back_until_character_completes(tok):
    ids = tok.encode("🚀", add_special_tokens=False)
    assert len(ids) > 1
    detok = IncrementalDetokenizer(tok, tok.encode("Go "))
    assert [detok.add([i]) for i in ids] == [""] * (len(ids) - 1) + ["🚀"]


def test_special_tokens(tok):
    ids = tok.encode("Hello", add_special_tokens=False) + [tok.eos_token_id]
    assert IncrementalDetokenizer(tok, [0]).add(ids) == "Hello"
    assert IncrementalDetokenizer(tok, [0], skip_special_tokens=False).add(ids) == "Hello" + tok.eos_token


def test_long_generation_one_token_at_a_time(tok):
    ids = tok.encode(CORPUS, add_special_tokens=False)
    detok = IncrementalDetokenizer(tok, tok.encode("Once upon a time"))
    assert "".join(detok.add([i]) for i in ids) == CORPUS
