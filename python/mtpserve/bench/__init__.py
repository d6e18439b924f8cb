"""Serving benchmark in the style of vLLM's / SGLang's bench_serving.

    mtpserve bench --base-url http://127.0.0.1:8000 --dataset-name sharegpt --num-prompts 200

Modules: ``datasets`` (ShareGPT and random prompts, tokenized with the served model's tokenizer),
``client`` (streaming OpenAI-compatible requests with a timestamp for every chunk), ``metrics``
(pure arithmetic over the per-request records), ``runner`` (load generation and the CLI flags),
``report`` (the printed summary), ``run_order`` (the balanced order in which interleaved benchmark methods run).
Nothing here imports torch.
"""
