"""A tiny DeepSeek-style byte-level BPE tokenizer, trained in well under a second, for tests.

`write_tiny_tokenizer(dir)` writes tokenizer.json, tokenizer_config.json (with a DeepSeek-style
chat template) and generation_config.json into `dir` and returns it. The vocabulary is small on
purpose so that CJK characters and emoji are split across several byte tokens.
"""
from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS, EOS, USER, ASSISTANT = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"
SPECIAL_TOKENS = [BOS, EOS, USER, ASSISTANT]  # ids 0..3 in that order

CORPUS = """\
The quick brown fox jumps over the lazy dog. A language model predicts the next token, and a
speculative decoder guesses several tokens at once so that one forward pass can verify them all.
Multi-token prediction layers reuse the main model's hidden state; when the guess is right the
engine emits more than one token per step. Caches hold compressed latent keys and values.
Hello world! How are you today? I am fine, thank you. Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 1024.
Le renard brun saute par-dessus le chien paresseux. Où est la bibliothèque? Ça va très bien.
Der schnelle braune Fuchs springt über den faulen Hund. Grüße aus München, schön und groß.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la estación? Mañana.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!
敏捷的棕色狐狸跳过了懒狗。你好，世界！今天天气很好，我们去公园散步吧。语言模型预测下一个词。
日本語のテキストも少し入れます。こんにちは、世界。東京は大きな都市です。
한국어 문장도 조금 있습니다. 안녕하세요, 세계!
Emoji: 😀 😃 😄 🚀 🔥 👍🏽 ❤️ 🎉 🐍 🦊 🌍 👨‍👩‍👧‍👦 ✨ 🤖
Math: ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ π θ λ — and symbols like € £ ¥ © ® ™ … « » “quoted” ‘text’.
"""

# Shaped like DeepSeek-V3's template: system prompts first, then alternating turns.
CHAT_TEMPLATE = (
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}"
    "{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] }}{% endif %}{% endfor %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '<｜User｜>' + message['content'] }}"
    "{% elif message['role'] == 'assistant' %}{{ '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' }}"
    "{% elif message['role'] != 'system' %}{{ raise_exception('unsupported role ' + message['role']) }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜>' }}{% endif %}"
)


def train_tiny_tokenizer(vocab_size: int = 400, bos_post_processor: bool = False) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS.splitlines(), trainer)
    if bos_post_processor:  # some checkpoints put BOS into tokenizer.json itself
        tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                           special_tokens=[(BOS, 0)])
    return tok


def write_tiny_tokenizer(directory, *, bos_post_processor: bool = False, add_bos_token: bool = True,
                         generation_eos_ids: list[int] | None = None) -> Path:
    """Write the tiny tokenizer's files into `directory` (created if needed) and return its Path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    train_tiny_tokenizer(bos_post_processor=bos_post_processor).save(str(directory / "tokenizer.json"))
    config = {
        "add_bos_token": add_bos_token,
        "add_eos_token": False,
        "bos_token": {"__type": "AddedToken", "content": BOS, "lstrip": False, "normalized": True,
                      "rstrip": False, "single_word": False},
        "eos_token": EOS,  # the plain string form, so both forms are exercised
        "model_max_length": 4096,
        "tokenizer_class": "LlamaTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2))
    if generation_eos_ids is not None:
        (directory / "generation_config.json").write_text(
            json.dumps({"bos_token_id": 0, "eos_token_id": generation_eos_ids}))
    return directory
