import random

import pytest

from mtpserve.detokenizer import IncrementalDetokenizer
from mtpserve.stop_strings import StopStringMatcher
from mtpserve.tokenizer import Tokenizer
from tiny_tokenizer import write_tiny_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer.from_dir(write_tiny_tokenizer(tmp_path_factory.mktemp("tok")))


def test_stop_in_new_text():
    m = StopStringMatcher(["END"])
    assert m.check("hello END world", 10) == ("END", "hello ")
    assert StopStringMatcher(["END"], include_stop_str_in_output=True).check("hello END world", 10) \
        == ("END", "hello END")


def test_stop_straddling_old_and_new_text():
    assert StopStringMatcher(["STOP"]).check("abcSTOP", 2) == ("STOP", "abc")


def test_stop_entirely_in_old_text_is_not_reported_again():
    # It was checked when that text arrived; only occurrences reaching the new text count.
    assert StopStringMatcher(["ab"]).check("ab cd", 3) == (None, "ab cd")
    assert StopStringMatcher(["ab"]).check("ab cd", 0) == (None, "ab cd")


def test_earliest_completed_occurrence_wins():
    m = StopStringMatcher(["xyz", "b", "bcdef"])
    # "b" completes before "bcdef" and "xyz"; a character-by-character run would stop there.
    assert m.check("abcdefxyz", 9) == ("b", "a")
    # Among stops completing at the same character, the one starting first (longest) wins.
    assert StopStringMatcher(["de", "cde"]).check("abcdef", 6) == ("cde", "ab")
    # A later occurrence in the new text of a stop seen earlier still needs the earliest one.
    assert StopStringMatcher(["aa"]).check("xaaaa", 4) == ("aa", "x")


def test_multibyte_stop():
    assert StopStringMatcher(["世界"]).check("你好世界🚀", 3) == ("世界", "你好")


def test_bad_stops_rejected():
    for stops in ("abc", [""], ["ok", 3]):
        with pytest.raises(ValueError, match="non-empty strings"):
            StopStringMatcher(stops)


def test_safe_len_holds_back_only_possible_stop_prefixes():
    m = StopStringMatcher(["</answer>", "STOP"])
    assert m.safe_len("result </ans") == len("result ")
    assert m.safe_len("result ST") == len("result ")
    assert m.safe_len("result <x") == len("result <x")
    assert m.safe_len("") == 0
    assert StopStringMatcher([]).safe_len("abc") == 3
    # Never more than len(longest stop) - 1 characters are held back.
    assert StopStringMatcher(["aaaa"]).safe_len("aaaaaaa") == 4


def run(tok, prompt, out_ids, stops, step_sizes, include=False):
    """An engine's frontend loop: steps of several tokens (MTP), each token detokenized and
    checked on its own so the stop lands on exactly the token that completed it. Streams only
    safe text. Returns (kept token ids, final text, text streamed before the end, stop)."""
    detok, m = IncrementalDetokenizer(tok, prompt), StopStringMatcher(stops, include)
    kept, streamed, i = [], "", 0
    for n in step_sizes:
        for t in out_ids[i:i + n]:
            kept.append(t)
            new = detok.add([t])
            stop, text = m.check(detok.text, len(new))
            if stop is not None:
                return kept, text, streamed, stop
            streamed += detok.text[len(streamed):m.safe_len(detok.text)]
        i += n
        if i >= len(out_ids):
            break
    return kept, detok.text, streamed, None


def test_speculative_steps_stop_on_the_same_token_as_single_steps(tok):
    rng = random.Random(0)
    text = "The fox said 你好世界 and then 🚀 launched. STOP here; more text after the stop."
    out_ids = tok.encode(text, add_special_tokens=False)
    prompt = tok.encode("Tell me:")
    for stops in (["STOP"], ["世界"], ["🚀"], ["said 你", "fox"], ["not present"], [" ", "."]):
        for include in (False, True):
            single = run(tok, prompt, out_ids, stops, [1] * len(out_ids), include)
            steps = [rng.randint(1, 5) for _ in out_ids]
            assert run(tok, prompt, out_ids, stops, steps, include) == single
            kept, final, streamed, stop = single
            assert (stop is None) == (stops == ["not present"])
            assert final.startswith(streamed)  # nothing streamed is ever taken back
            if stop is None:
                assert kept == out_ids and final == streamed == text
            else:
                cut = text.index(stop)  # every stop here first appears in full at that position
                end = cut + len(stop)
                assert final == text[:end if include else cut]
                # The last kept token is the one whose text completed the stop string.
                assert len(tok.decode(kept[:-1]).rstrip("\ufffd")) < end
                assert tok.decode(kept).startswith(text[:end])
