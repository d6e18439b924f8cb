"""The grammar masker on its own (verify-row masks, draft revision) and in the engine: an output the
grammar forces token by token comes out exactly, with every MTP draft accepted."""
import subprocess
import sys
from array import array

import llguidance
import numpy as np
import pytest
import tokenizers

from mtpserve import LLM, SamplingParams, tool_calls
from mtpserve.engine_args import DEFAULT_MODEL
from mtpserve.structured_output import GrammarMasker, StructuredOutput
from mtpserve.tokenizer import Tokenizer

VOCAB, EOS = 8192, 1
# Nothing to choose: the grammar forces every byte.
FORCED = {"type": "object", "properties": {"color": {"enum": ["red"]}, "size": {"enum": [12]}},
          "required": ["color", "size"], "additionalProperties": False}
FORCED_TEXT = '{"color":"red","size":12}'
PAIR = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer", "minimum": 0,
                                                                      "maximum": 9}},
        "required": ["a", "b"], "additionalProperties": False}


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_dir(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def masker(tokenizer):
    return GrammarMasker(tokenizer.to_json(), VOCAB, [EOS])


def tokens(values) -> memoryview:
    return memoryview(array("q", values))


def allowed(row: np.ndarray) -> set[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:VOCAB]
    return set(np.flatnonzero(bits).tolist())


def test_each_verify_row_is_the_mask_after_the_drafts_before_it(masker, tokenizer):
    structured = StructuredOutput.json_schema(PAIR)
    text = tokenizer.encode('{"a":true,"b":7}', add_special_tokens=False)
    outputs, drafts = text[:2], text[2:5] + [EOS]  # EOS is forbidden mid-object: the rows after it are left open
    state = masker.constraint(structured).state
    masks = np.full((8, (VOCAB + 31) // 32), -1, dtype=np.int32)
    masker.fill([(state, tokens(outputs), drafts, 2)], memoryview(masks))

    reference = llguidance.LLMatcher(llguidance.LLTokenizer(tokenizer.to_json(), n_vocab=VOCAB, eos_token=EOS),
                                     structured.grammar)
    assert reference.consume_tokens(outputs)
    for j in range(4):
        assert allowed(masks[2 + j]) == allowed(np.frombuffer(reference.compute_bitmask(), dtype=np.int32)), j
        assert j == 3 or reference.consume_token(drafts[j])
    assert EOS not in allowed(masks[5])
    for row in (0, 1, 6, 7):  # rows of other requests, and past a forbidden draft: untouched
        assert len(allowed(masks[row])) == VOCAB
    assert state.seen == len(outputs)


def test_drafts_are_kept_up_to_the_first_forbidden_one_then_forced(masker, tokenizer):
    forced = tokenizer.encode(FORCED_TEXT, add_special_tokens=False)
    state = masker.constraint(StructuredOutput.json_schema(FORCED)).state
    garbage = tokenizer.encode(" hello world again", add_special_tokens=False)[:3]
    assert masker.revise_drafts([(state, tokens([]), garbage)]) == [forced[:3]]
    # A right first draft stays; the wrong ones after it are replaced by what the grammar forces.
    assert masker.revise_drafts([(state, tokens(forced[:1]), [forced[1]] + garbage[:2])]) == [forced[1:4]]
    # The revision leaves the matcher where the outputs put it.
    assert masker.revise_drafts([(state, tokens(forced[:2]), forced[2:4])]) == [forced[2:4]]


def test_a_bad_schema_names_the_problem():
    with pytest.raises(ValueError, match="foo"):
        StructuredOutput.json_schema({"type": "foo"}).check()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_forced_output_comes_out_exactly_with_every_draft_accepted(temperature):
    llm = LLM(dtype="float32", num_speculative_tokens=2, speculative_policy="fixed")
    try:
        params = SamplingParams(temperature=temperature, seed=5, max_tokens=64,
                                structured_output=StructuredOutput.json_schema(FORCED))
        outputs = llm.chat([[{"role": "user", "content": f"Say {i}."}] for i in range(3)], params)
        stats = llm.stats().spec
    finally:
        llm.shutdown()
    for output in outputs:
        assert output.outputs[0].text == FORCED_TEXT and output.outputs[0].finish_reason == "stop"
    assert stats.draft_tokens > 0 and stats.accepted_tokens == stats.draft_tokens


def test_structured_output_needs_the_engines_grammar_masker():
    with pytest.raises(ValueError, match="grammar masker"):
        SamplingParams(structured_output=StructuredOutput.json_object()).to_cpp()
    with pytest.raises(ValueError, match="min_tokens"):
        SamplingParams(min_tokens=3, structured_output=StructuredOutput.json_object())


DROPPED_WHILE_RUNNING = """
import gc, time
from mtpserve import LLM, SamplingParams
from mtpserve.structured_output import StructuredOutput
llm = LLM(dtype="float32", num_speculative_tokens=2)
params = SamplingParams(max_tokens=2000, structured_output=StructuredOutput.json_object())
for i in range(4):
    llm.core.engine.add_request(str(i), [5, 6, 7], params.to_cpp(llm.core.grammars))
time.sleep(0.3)
del llm
gc.collect()
print("dropped")
"""


def test_an_engine_dropped_while_masking_does_not_hang():
    # Its thread waits for the GIL to fill masks while the deleting thread joins it.
    done = subprocess.run([sys.executable, "-c", DROPPED_WHILE_RUNNING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "dropped" in done.stdout, done.stderr[-2000:]


def test_a_forced_call_takes_markers_that_are_single_tokens(tokenizer):
    # DeepSeek-V3's own tokenizer has the tool-call markers as added tokens: the grammar takes them by id.
    vocab = tokenizers.Tokenizer.from_str(tokenizer.to_json())
    markers = [tool_calls.CALLS_BEGIN, tool_calls.CALLS_END, tool_calls.CALL_BEGIN, tool_calls.CALL_END, tool_calls.SEP]
    vocab.add_special_tokens(markers)
    masker = GrammarMasker(vocab.to_str(), VOCAB + len(markers), [EOS])
    weather = {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"], "additionalProperties": False}}
    structured = StructuredOutput.tool_call([{"type": "function", "function": weather}], "get_weather",
                                            vocab.token_to_id)
    structured.check()
    call = tool_calls.CALLS_BEGIN + tool_calls.render_call("get_weather", '{"city":"Paris"}') + tool_calls.CALLS_END
    ids = vocab.encode(call, add_special_tokens=False).ids
    assert set(vocab.token_to_id(m) for m in markers) <= set(ids)
    matcher = masker.constraint(structured).state.matcher
    assert matcher.consume_tokens(ids) and matcher.is_accepting()
