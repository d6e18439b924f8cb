"""mtpserve: DeepSeek-V3 inference with the model's own MTP layer as a lossless speculative draft."""
import torch  # noqa: F401  (loads libtorch before the C++ extension that links it)

__version__ = "0.1.0"

from mtpserve.llm import LLM  # noqa: E402
from mtpserve.sampling_params import SamplingParams  # noqa: E402

__all__ = ["LLM", "SamplingParams"]
