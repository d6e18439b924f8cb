"""Tensor parallelism of the C++ model over gloo: two and four real processes (torch.multiprocessing) whose
shards give the TP=1 hidden states and logits, for the target model and the MTP layer."""
import pytest
import torch
import torch.multiprocessing as mp

from mtpserve import distributed
from mtpserve.model_loader import load_model
from paged import PagedLayout
from mtpserve.launch import free_port_pair


def forwards(model, seed=0):
    """A prefill of two sequences then one decode step each; returns (hidden, logits, mtp hidden, mtp logits)."""
    torch.manual_seed(seed)
    vocab = model.config.vocab_size
    caches, mtp_caches = model.allocate_caches(16, 4)
    layout = PagedLayout(16, 4, seed=seed)
    a, b = layout.add_sequence(), layout.add_sequence()
    out = []
    for lens in ({a: 9, b: 5}, {a: 1, b: 1}):
        ids = torch.randint(0, vocab, (sum(lens.values()),))
        step = layout.step(lens)
        hidden = model.target.forward(caches, ids, **step)
        logits = model.target.logits(hidden)
        mtp = model.mtp_layers[0]
        mtp_hidden = mtp.forward(model.target, mtp_caches[0], ids, hidden, **{**step, "positions": step["positions"] + 1})
        out += [hidden, logits, mtp_hidden, mtp.logits(mtp_hidden)]
    return out


def tp_rank(rank, port, model_dir, out_file, ep_size=1, world=2):
    """Rank `rank` of `world`: forwards() of its shards (experts whole with ep_size = world); rank 0 saves them."""
    tp = distributed.init_tensor_parallel(rank, world, f"127.0.0.1:{port}", ep_size=ep_size)
    try:
        model = load_model(model_dir, "float32", with_mtp=True, tp=tp)
        result = forwards(model)
        if rank == 0:
            torch.save(result, out_file)
    finally:
        distributed.destroy()


@pytest.mark.parametrize("world", [2, 4])
def test_tp_matches_tp1(world, tiny_model_dir, tmp_path):
    expected = forwards(load_model(tiny_model_dir, "float32", with_mtp=True))
    out_file = tmp_path / f"tp{world}.pt"
    mp.spawn(tp_rank, args=(free_port_pair(), str(tiny_model_dir), str(out_file), 1, world), nprocs=world, join=True)
    got = torch.load(out_file)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def refuse_rank(rank, port, model_dir):
    tp = distributed.init_tensor_parallel(rank, 3, f"127.0.0.1:{port}")
    try:
        with pytest.raises(ValueError, match="tensor parallel size 3 does not divide"):
            load_model(model_dir, "float32", tp=tp)
    finally:
        distributed.destroy()


def test_tp_size_must_divide_the_sharded_dims(tiny_model_dir):
    mp.spawn(refuse_rank, args=(free_port_pair(), str(tiny_model_dir)), nprocs=3, join=True)
