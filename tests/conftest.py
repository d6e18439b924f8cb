"""Shared fixtures: a random tiny DeepSeek-V3 + MTP checkpoint with a tokenizer, usable by LLM."""
import pytest
import torch

from checkpoints import write_checkpoint
from tiny_tokenizer import write_tiny_tokenizer

# 512 ids cover the tiny tokenizer's 400; two groups of experts, q LoRA, one dense layer.
TINY_MODEL = dict(vocab_size=512, q_lora_rank=24, n_group=2, topk_group=1, num_hidden_layers=3,
                  max_position_embeddings=256, eos_token_id=1)


# Parametrize a test over the devices with mtpserve kernels: the CPU always, the GPU (marker `cuda`)
# where one is present.
DEVICES = ["cpu", pytest.param("cuda:0", marks=[pytest.mark.cuda, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU here")])]


def write_tiny_model(path, **overrides):
    """The tiny model + tokenizer at `path`, with TINY_MODEL's settings changed by `overrides`."""
    write_checkpoint(path, seed=11, **{**TINY_MODEL, **overrides})
    write_tiny_tokenizer(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))
