"""A batch in bounded passes: the grouping, the same loss and gradients as one pass (the shared prefix's gradients
sent back once), and a Ctrl-C that lands inside a backward pass raised there rather than when it ends."""

from __future__ import annotations

import signal

import pytest

from scijudge.distillation._passes import passes


def test_passes_keep_rows_times_the_longest_row_within_the_budget_and_a_long_row_alone():
    rows = [[0] * n for n in (12, 14, 30, 11, 11, 11, 60)]  # 10 shared tokens: 2, 4, 20, 1, 1, 1, 50 beyond them
    assert passes(rows, range(7), 10, 8) == [[0, 1], [2], [3, 4, 5], [6]]  # 2x4 = 8 fits; 3x20 and 4x50 do not
    assert passes(rows, [6, 0], 10, 1) == [[6], [0]]
    assert passes(rows, range(7), 0, 10_000) == [list(range(7))]


def _tiny_run(tiny_base):
    torch = pytest.importorskip("torch")
    from scijudge.distillation import _train as tr

    tok, base = tr.load_base(tiny_base, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    vocab = base.config.vocab_size
    head = torch.randint(5, vocab, (24,), generator=g).tolist()
    ids = [head + torch.randint(5, vocab, (n,), generator=g).tolist() for n in (3, 9, 5, 7, 2, 8)]
    targets = torch.softmax(torch.randn(6, 3, generator=g), -1).tolist()
    data = tr.Encoded(ids, targets=targets, level_ids=[1, 2, 3])
    model = tr.attach_lora(base, tr.TrainConfig(lora_r=2), data.level_ids).eval()
    with torch.no_grad():  # LoRA B starts at zero: move it, so the gradients through the prefix are not trivial
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=g)
    params = [p for p in model.parameters() if p.requires_grad]

    def step(tokens_per_pass):
        for p in params:
            p.grad = None
        loss = tr.batch_loss(model, data, list(range(6)), tr.shared_prefix(ids), tok.pad_token_id,
                             torch.tensor(data.level_ids), torch.tensor(targets), torch, torch.device("cpu"), None,
                             tokens_per_pass, True)
        return loss, [None if p.grad is None else p.grad.clone() for p in params]

    return torch, tr, model, step


@pytest.mark.slow  # a tiny model's forward and backward passes, a second or two
def test_a_batch_in_passes_has_the_loss_and_gradients_of_one_pass(tiny_base, monkeypatch):
    torch, tr, _, step = _tiny_run(tiny_base)
    from scijudge.distillation._passes import SharedPrefix

    assert tr.shared_prefix([[1, 2, 3, 4], [1, 2, 3, 5]]) == 3
    whole_loss, whole = step(10_000)
    split_loss, split = step(1)  # one row a pass, the prefix run once and its gradients sent back once
    assert split_loss == pytest.approx(whole_loss, abs=1e-6)
    assert all(g is not None for g in whole) and len(whole) == len(split)
    for a, b in zip(whole, split, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)
    # the prefix's share of the gradient is in there: without the prefix's own backward the gradients differ
    monkeypatch.setattr(SharedPrefix, "backward", lambda self: None)
    _, cut = step(1)
    assert any(a is not None and (b is None or not torch.allclose(a, b, atol=1e-6, rtol=1e-4))
               for a, b in zip(whole, cut, strict=True))


@pytest.mark.slow  # a tiny model's forward and backward passes, a second or two
def test_a_ctrl_c_during_a_backward_pass_is_raised_at_the_next_layer(tiny_base, monkeypatch):
    torch, tr, model, step = _tiny_run(tiny_base)
    from scijudge.distillation import _passes

    ticks: list[int] = []

    def tick(grad):
        ticks.append(1)
        if len(ticks) == 1:
            signal.raise_signal(signal.SIGINT)  # the real signal: Python's own handler raises KeyboardInterrupt

    monkeypatch.setattr(_passes, "_tick", tick)
    layers = len(model.get_base_model().model.layers)
    assert layers >= 2
    with _passes.interruptible_backward(model, torch), pytest.raises(KeyboardInterrupt):
        step(10_000)
    assert ticks == [1]  # raised at the top layer's hook: the lower layers' backward never ran
    first = model.get_base_model().model.layers[0]
    assert all(p.grad is None for p in first.parameters() if p.requires_grad)
    monkeypatch.setattr(_passes, "_tick", lambda grad: ticks.append(1))
    with _passes.interruptible_backward(model, torch):
        step(10_000)
    # one hook per decoder layer of the pass, and of the prefix but its top layer (whose output reaches no key or
    # value the pass reads)
    assert len(ticks) == 1 + layers + (layers - 1)
