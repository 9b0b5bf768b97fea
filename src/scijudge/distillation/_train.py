"""The training loop: a LoRA adapter on a local causal LM, in decision form (CE/KL at the answer position) or
generated form (causal-LM loss on the teacher's answer), with checkpoints that a resumed run replays exactly.

Decision form: an example is a prompt (token ids ending where the judge's answer starts) and a target distribution
over the level tokens (one-hot human score, the annotators' spread, or the teacher's ``probs``). The loss is the
cross-entropy between the target and the student's next-token distribution renormalised over the level tokens
(what decision mode reads); with a soft target it differs from KL(target || student) by the target's entropy
only, so the gradients are those of the KL. Only the answer position goes through ``lm_head``
(``logits_to_keep=1``), and the judge's system prompt, shared by every example, is computed once per step and
its keys and values repeated for the batch's rows (the engine does the same when it judges).

The default recipe (issue 38): a LoRA on every linear layer but the output layer (``all-linear``), and beside it the
level tokens' rows of the output layer (peft's ``trainable_token_indices``), started from a linear probe on the
base's answer-position states (``probe_level_rows``); then a short LR range test (``lr_range_test``) picks the peak
LR. On a small random base the answer-position state varies across prompts by about 1% of its size: LoRA and Adam
on the raw rows leave the loss at ln 5, the whitened probe reads the cue at once. The base's dropout stays off.

Checkpoints (``OUT/checkpoint/state.pt``, every ``checkpoint_every`` steps, at the end and on Ctrl-C; the adapter
itself is written to ``OUT``) hold the adapter weights, optimizer, LR schedule, every RNG state, the step and the
loss curve, plus the run's identity (settings, data hash, base). The batch at step k is a pure function of
(seed, k), so a resumed run sees exactly the batches an uninterrupted one would have seen; the probe and the LR
chosen are in the checkpoint (a resumed run does not redo them). A checkpoint is written
to ``checkpoint.tmp`` and swapped in, so a kill mid-write leaves the previous one usable.

Why no TRL trainer: none implements the decision-form loss (a distribution at one position restricted to the
level tokens), and this loop gives exact control over resume and data order without new dependencies.
"""

from __future__ import annotations

import functools
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scijudge.distillation._passes import (TOKENS_PER_PASS, SharedPrefix, checkpoint_layers_in_eval,
                                           interruptible_backward, passes, release_memory)
from scijudge.errors import InputError, ModelError

DEFAULT_TARGETS = ("all-linear",)
"""peft's every linear layer but the output layer (q/k/v/o and MLP projections on Llama, c_attn/c_proj/c_fc on
GPT-2): the same default on any architecture."""
LR_CANDIDATES = 5  # the range test tries lr, lr/10, ..., lr/10**4
LR_TEST_STEPS = 3  # steps per candidate, from the same start, on the first batches
_INSTALL = "pip install 'scijudge[local]'"


def require_training() -> tuple[Any, Any, Any]:
    """torch, transformers and peft, or a ModelError naming the extra that installs them."""
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError(f"distillation needs torch, transformers and peft ({exc.name} is missing): {_INSTALL}") from exc
    return torch, transformers, peft


@dataclass
class TrainConfig:
    """Training settings; ``identity()`` is what a resumed run must share with the interrupted one."""

    form: str = "decision"  # "decision" | "generated"
    lora_r: int = 8
    lora_alpha: int | None = None  # default 2 * r
    lora_dropout: float = 0.0
    level_rows: bool = True  # train the level tokens' rows of the output layer beside the LoRA (decision form)
    lr_search: bool = True  # a short range test picks the LR (lr, lr/10, ...) on the first steps
    targets: tuple[str, ...] = DEFAULT_TARGETS
    lr: float = 5e-3
    weight_decay: float = 0.0
    warmup_frac: float = 0.1
    epochs: int = 10
    batch_size: int = 8
    max_grad_norm: float = 1.0
    seed: int = 0
    checkpoint_every: int = 20
    gradient_checkpointing: bool = False
    device: str = "auto"  # "auto" | "cpu" | "cuda"
    threads: int | None = None  # torch.set_num_threads on CPU (1 is fastest for tiny models on shared cores)
    tokens_per_pass: int = TOKENS_PER_PASS  # padded tokens in one forward/backward pass (memory; same gradients)

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("checkpoint_every", "device", "threads", "gradient_checkpointing", "tokens_per_pass"):
            d.pop(key)
        d["targets"] = list(self.targets)
        d["lora_alpha"] = self.alpha
        return d

    @property
    def alpha(self) -> int:
        return int(self.lora_alpha if self.lora_alpha is not None else 2 * self.lora_r)

    def check(self) -> None:
        """Refuse settings that cannot train (one line naming the option)."""
        checks = [(self.form in ("decision", "generated"), "form", "must be decision or generated"),
                  (self.lora_r >= 1, "lora_r", "must be at least 1"), (self.lr > 0, "lr", "must be positive"),
                  (self.epochs >= 1, "epochs", "must be at least 1"),
                  (self.batch_size >= 1, "batch_size", "must be at least 1"),
                  (self.tokens_per_pass >= 1, "tokens_per_pass", "must be at least 1"),
                  (bool(self.targets), "targets", "must name at least one module"),
                  (self.device in ("auto", "cpu", "cuda"), "device", "must be auto, cpu or cuda")]
        for ok, option, why in checks:
            if not ok:
                raise InputError(why, field=option)


@dataclass
class Encoded:
    """Training examples as token ids: decision form has ``targets`` (rows over the levels) and ``level_ids``;
    generated form has ``labels`` (-100 over the prompt)."""

    ids: list[list[int]]
    targets: list[list[float]] | None = None
    level_ids: list[int] | None = None
    labels: list[list[int]] | None = None


@dataclass
class TrainResult:
    adapter_dir: Path
    steps: int
    total_steps: int
    losses: list[float]
    seconds: float
    resumed_from: int | None
    interrupted: bool = False
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ model


def pick_device(cfg: TrainConfig, torch: Any) -> tuple[Any, Any]:
    """(device, autocast dtype): bf16 autocast on CUDA (fp16 where bf16 is missing); fp32 on CPU."""
    want = cfg.device
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    if want == "cuda" and not torch.cuda.is_available():
        raise ModelError("device cuda: no CUDA device is available here")
    device = torch.device(want)
    if device.type == "cuda":
        return device, (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16)
    return device, None


def load_base(base_dir: Path, device: Any) -> tuple[Any, Any]:
    """Tokenizer and base model from a local folder (never the network); on CUDA the base is held in bf16."""
    torch, transformers, _ = require_training()
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        model = transformers.AutoModelForCausalLM.from_pretrained(str(base_dir), local_files_only=True, dtype=dtype)
    except Exception as exc:
        raise ModelError(f"cannot load the base model in {base_dir}: {type(exc).__name__}: {exc}") from exc
    model.to(device)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok, model


def output_layer_name(model: Any) -> str:
    """The module name of the model's output layer (``lm_head`` for most causal LMs)."""
    head = model.get_output_embeddings()
    return next(name for name, module in model.named_modules() if module is head)


def attach_lora(model: Any, cfg: TrainConfig, level_ids: Sequence[int] | None = None) -> Any:
    torch, _, peft = require_training()
    torch.manual_seed(cfg.seed)  # peft draws lora_A from the global RNG
    extra: dict[str, Any] = {}
    if cfg.level_rows and level_ids:
        extra["trainable_token_indices"] = {output_layer_name(model): sorted(set(level_ids))}
    lora = peft.LoraConfig(r=cfg.lora_r, lora_alpha=cfg.alpha, lora_dropout=cfg.lora_dropout,
                           target_modules="all-linear" if tuple(cfg.targets) == ("all-linear",) else list(cfg.targets),
                           task_type="CAUSAL_LM", **extra)
    try:
        pm = peft.get_peft_model(model, lora)  # autocast_adapter_dtype keeps adapter weights fp32 on a bf16 base
    except ValueError as exc:
        raise InputError(f"targets {','.join(cfg.targets)}: {exc}", field="targets") from exc
    if cfg.gradient_checkpointing:
        pm.config.use_cache = False
        pm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return pm


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, torch: Any, device: Any, *,
             start: int = 0) -> dict[str, Any]:
    """Left-padded ids, mask and position ids (``start`` at each row's first real token), as the engine does."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(list(row), dtype=torch.long)
        mask[i, width - len(row):] = 1
    pos = start + (mask.cumsum(1) - 1).clamp(min=0)
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": pos.to(device)}


def answer_logits(model: Any, rows: Sequence[Sequence[int]], shared: int, pad_id: int, torch: Any,
                  device: Any, prefix: SharedPrefix | None = None) -> Any:
    """Next-token logits (fp32, rows x vocab) at the end of each row; the first ``shared`` tokens (the same in
    every row) are run once (or read from ``prefix``) and their keys and values repeated for the rows."""
    if prefix is None and (shared <= 0 or len(rows) == 1):
        out = model(**left_pad(rows, pad_id, torch, device), use_cache=False, logits_to_keep=1)
        return out.logits[:, -1, :].float()
    if prefix is None:
        prefix = SharedPrefix(model, rows[0][:shared], torch, device)
    start = prefix.length
    suffix = left_pad([r[start:] for r in rows], pad_id, torch, device, start=start)
    mask = torch.cat([torch.ones((len(rows), start), dtype=torch.long, device=device), suffix["attention_mask"]], 1)
    out = model(input_ids=suffix["input_ids"], attention_mask=mask, position_ids=suffix["position_ids"],
                use_cache=True, logits_to_keep=1, **{prefix.keyword: prefix.cache(model, len(rows))})
    return out.logits[:, -1, :].float()


def level_rows_param(model: Any) -> Any:
    """The trainable level rows of the output layer (peft's trainable-token delta), or None."""
    for name, param in model.named_parameters():
        if "trainable_tokens_delta" in name and param.requires_grad:
            return param
    return None


def probe_level_rows(model: Any, data: Encoded, shared: int, tokens_per_pass: int, pad_id: int, torch: Any,
                     device: Any, amp_dtype: Any) -> dict[str, Any]:
    """Linear probing before fine-tuning (LP-FT, Kumar et al. 2022): fit the level rows of the output layer to the
    targets on the base's own answer-position states (a ridge-regularised multinomial logistic regression,
    solved by L-BFGS in whitened coordinates), so the LoRA starts from a head that already reads the cue.

    On a random or weak base the answer-position state varies across prompts by about 1% of its size; Adam on
    the raw rows cannot find that direction in a few hundred steps, a whitened solve finds it at once."""
    param = level_rows_param(model)
    if param is None or data.targets is None or data.level_ids is None:
        return {}
    head = model.get_output_embeddings()
    seen: list[Any] = []
    states: list[Any] = []
    dtypes: list[Any] = []

    def capture(_module: Any, args: Any) -> None:
        dtypes.append(args[0].dtype)
        seen.append(args[0][:, -1].detach().double().cpu())

    hook = head.register_forward_pre_hook(capture)
    try:
        with torch.no_grad(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            prefix = SharedPrefix(model, data.ids[0][:shared], torch, device) if shared > 0 else None
            for group in passes(data.ids, range(len(data.ids)), prefix.length if prefix else 0, tokens_per_pass):
                answer_logits(model, [data.ids[i] for i in group], 0, pad_id, torch, device, prefix=prefix)
                states.append(seen[-1])  # the rows' answer positions (the shared prefix is a call of its own)
    finally:
        hook.remove()
    h = torch.cat(states)  # n x d
    eps = float(torch.finfo(dtypes[-1]).eps)
    targets = torch.tensor(data.targets, dtype=torch.float64)
    order = sorted(set(data.level_ids))
    cols = [order.index(t) for t in data.level_ids]  # delta rows are in sorted token order
    rows0 = param.detach().double().cpu()  # (sorted levels) x d
    base_logits = h @ rows0[cols].T
    u, s, vt = torch.linalg.svd(h, full_matrices=False)
    # directions below the resolution of the states (their dtype's rounding, ~eps/sqrt(d) of the largest singular
    # value) carry rounding, not signal: fp32 keeps 1e-4 and up, bf16 on a 4096-wide model about the same
    keep = s > s[0] * max(1e-4, 2 * eps / math.sqrt(h.shape[1]))
    u, s, vt = u[:, keep], s[keep], vt[keep]
    n = h.shape[0]
    z = u * math.sqrt(n)  # whitened features (uncentred second moment: the mean direction acts as a bias)
    w = torch.zeros((len(cols), z.shape[1]), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=200, tolerance_grad=1e-9, line_search_fn="strong_wolfe")

    def objective() -> Any:
        opt.zero_grad()
        logp = torch.log_softmax(base_logits + z @ w.T, dim=-1)
        loss = -(targets * logp).sum(-1).mean() + (w * w).sum() / (2 * n)
        loss.backward()
        return loss

    opt.step(objective)
    delta = w.detach() @ torch.diag(math.sqrt(n) / s) @ vt  # levels x d, in the base's coordinates
    with torch.no_grad():
        fitted = rows0.clone()
        fitted[cols] += delta
        param.copy_(fitted.to(param.dtype).to(param.device))
        logp = torch.log_softmax(h @ fitted[cols].T, dim=-1)
        after = float(-(targets * logp).sum(-1).mean())
        before = float(-(targets * torch.log_softmax(base_logits, dim=-1)).sum(-1).mean())
    return {"loss_before": round(before, 6), "loss_after_probe": round(after, 6)}


def decision_loss(logits: Any, level_ids: Any, targets: Any, torch: Any) -> Any:
    """Mean cross-entropy between target rows (B x L) and the student's distribution over the level tokens."""
    logp = torch.log_softmax(logits[:, level_ids], dim=-1)
    return -(targets * logp).sum(-1).mean()


def shared_prefix(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every row shares (leaving each row at least one token of its own)."""
    first = rows[0]
    n = min(len(r) for r in rows) - 1
    for r in rows[1:]:
        i = 0
        while i < n and r[i] == first[i]:
            i += 1
        n = i
    return max(0, n)


# ----------------------------------------------------------------------------------------------- checkpoints


def _rng_state(torch: Any) -> dict[str, Any]:
    import numpy as np

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any], torch: Any) -> None:
    import numpy as np

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(ckpt: Path, model: Any, optimizer: Any, scheduler: Any, step: int, losses: list[float],
                    identity: dict[str, Any], torch: Any, recipe: dict[str, Any] | None = None) -> None:
    """Write ``ckpt.tmp`` then swap it in, so a kill mid-write leaves the previous checkpoint usable."""
    tmp, old = ckpt.with_name(ckpt.name + ".tmp"), ckpt.with_name(ckpt.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trainable = {k: v.detach().cpu().clone() for k, v in model.named_parameters() if v.requires_grad}
    torch.save({"trainable": trainable, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "rng": _rng_state(torch), "step": step, "losses": list(losses), "identity": identity,
                "recipe": recipe or {}},
               tmp / "state.pt")
    if ckpt.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(ckpt, old)
    os.replace(tmp, ckpt)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(ckpt: Path, torch: Any) -> dict[str, Any] | None:
    for candidate in (ckpt, ckpt.with_name(ckpt.name + ".old")):
        if (candidate / "state.pt").is_file():
            try:
                return torch.load(candidate / "state.pt", map_location="cpu", weights_only=False)
            except Exception as exc:
                raise InputError(f"unreadable checkpoint ({type(exc).__name__}: {exc}); delete it to start afresh",
                                 file=candidate / "state.pt") from exc
    return None


# ---------------------------------------------------------------------------------------------------- training


def epoch_order(n: int, seed: int, epoch: int, torch: Any) -> list[int]:
    g = torch.Generator().manual_seed(seed * 100_003 + epoch)
    return [int(i) for i in torch.randperm(n, generator=g).tolist()]


def _lr_lambda(total: int, warmup: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))
    return f


def train(base_dir: Path, data: Encoded, out_dir: Path, cfg: TrainConfig, *, identity: dict[str, Any],
          resume: bool = True, stop_after_step: int | None = None,
          on_step: Callable[[int, int, float], None] | None = None, loaded: tuple[Any, Any] | None = None,
          device: Any = None) -> TrainResult:
    """Train a LoRA adapter; write it to ``out_dir`` (loadable as ``hf:out_dir``) and checkpoints under it.

    ``identity``: data hash and base (added to the settings) that a checkpoint must match to be resumed.
    ``stop_after_step`` acts as a Ctrl-C after that step (tests). ``on_step(step, total, loss)`` drives a bar.
    """
    torch, _, _ = require_training()
    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    if device is None:
        device, amp_dtype = pick_device(cfg, torch)
    else:
        amp_dtype = (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16) if device.type == "cuda" else None
    threads_before = torch.get_num_threads()
    deterministic_before = (torch.are_deterministic_algorithms_enabled(),
                            torch.is_deterministic_algorithms_warn_only_enabled())
    if device.type == "cpu" and cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(device.type == "cpu", warn_only=True)
    try:
        return _train(base_dir, data, out_dir, cfg, identity=identity, resume=resume, stop_after_step=stop_after_step,
                      on_step=on_step, loaded=loaded, device=device, amp_dtype=amp_dtype, t0=t0)
    finally:  # the process's torch settings are the caller's again
        torch.use_deterministic_algorithms(deterministic_before[0], warn_only=deterministic_before[1])
        torch.set_num_threads(threads_before)


def batch_loss(model: Any, data: Encoded, idx: list[int], shared: int, pad: int, lev: Any, tgt: Any, torch: Any,
               device: Any, amp_dtype: Any, tokens_per_pass: int, backward: bool) -> float:
    """The mean training loss of the examples ``idx`` (decision: CE over the level tokens; generated: causal LM);
    with ``backward``, its gradients are added to the parameters'. Runs in bounded passes (``_passes``)."""
    autocast = torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)
    total = 0.0
    with torch.set_grad_enabled(backward):
        if tgt is None:
            return _generated_loss(model, data, idx, pad, torch, device, autocast, tokens_per_pass, backward)
        prefix = None
        if shared > 0 and len(idx) > 1:
            with autocast:
                prefix = SharedPrefix(model, data.ids[idx[0]][:shared], torch, device)
        for group in passes(data.ids, idx, prefix.length if prefix else 0, tokens_per_pass):
            with autocast:
                logits = answer_logits(model, [data.ids[i] for i in group], 0, pad, torch, device, prefix=prefix)
                loss = decision_loss(logits, lev, tgt[group].to(device), torch) * (len(group) / len(idx))
            if backward:
                loss.backward()
            total += float(loss.detach())
            del logits, loss
        if backward and prefix is not None:
            prefix.backward()
    return total


def _generated_loss(model: Any, data: Encoded, idx: list[int], pad: int, torch: Any, device: Any, autocast: Any,
                    tokens_per_pass: int, backward: bool) -> float:
    """Causal-LM loss on the answer tokens, the mean over all of the batch's answer tokens, in passes."""
    labels_of = data.labels or []
    answer_tokens = max(1, sum(1 for i in idx for t in labels_of[i] if t != -100))
    total = 0.0
    for group in passes(data.ids, idx, 0, tokens_per_pass):
        with autocast:
            batch = left_pad([data.ids[i] for i in group], pad, torch, device)
            labels = torch.full_like(batch["input_ids"], -100)
            for r, i in enumerate(group):
                lab = labels_of[i]
                labels[r, labels.shape[1] - len(lab):] = torch.tensor(lab, device=device)
            logits = model(**batch, use_cache=False).logits.float()
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                     labels[:, 1:].reshape(-1), ignore_index=-100,
                                                     reduction="sum") / answer_tokens
        if backward:
            loss.backward()
        total += float(loss.detach())
        del logits, loss
    return total


def _step(optimizer: Any, compute: Callable[[], float], params: Any, max_grad_norm: float, torch: Any) -> float:
    """One optimizer step: ``compute()`` adds the batch's gradients and returns its loss; gradients are clipped to
    ``max_grad_norm`` when set. The training loop's and the LR range test's, so the range test measures the step
    that training takes."""
    optimizer.zero_grad(set_to_none=True)
    loss = compute()
    if max_grad_norm:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    return loss


def lr_range_test(model: Any, params: list[Any], batches: list[list[int]],
                  loss_of: Callable[[list[int], bool], float], cfg: TrainConfig,
                  torch: Any) -> tuple[float, list[dict[str, float]]]:
    """Pick the peak LR: from the same start, ``LR_TEST_STEPS`` AdamW steps at each of lr, lr/10, ... on the first
    batches, then the loss on those batches; the candidate with the lowest loss wins (the larger on a tie within
    1%). The weights, and every RNG, are put back afterwards. The candidates' losses go on the card.
    ``loss_of(idx, backward)``: the loss of examples ``idx``, and with ``backward`` their gradients."""
    start = [p.detach().clone() for p in params]
    rng = _rng_state(torch)
    seen = sorted({i for b in batches for i in b})
    reference = loss_of(seen, False)
    trials: list[dict[str, float]] = []
    for k in range(LR_CANDIDATES):
        lr = cfg.lr / 10 ** k
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay)
        for idx in batches:
            _step(optimizer, functools.partial(loss_of, idx, True), params, cfg.max_grad_norm, torch)
        after = loss_of(seen, False)
        with torch.no_grad():
            for p, p0 in zip(params, start, strict=True):
                p.copy_(p0)
        trials.append({"lr": lr, "loss": after if math.isfinite(after) else float("inf")})
    _set_rng_state(rng, torch)
    best = min(t["loss"] for t in trials)
    chosen = next(t["lr"] for t in trials if t["loss"] <= best + 0.01 * abs(best) + 1e-9)
    trials.insert(0, {"lr": 0.0, "loss": reference})
    return chosen, trials


@dataclass
class _Run:
    """One training run's fixed parts: the model, the data, how a batch's loss is had, where checkpoints go."""

    model: Any
    data: Encoded
    cfg: TrainConfig
    identity: dict[str, Any]
    params: list[Any]
    loss_of: Callable[[list[int], bool], float]
    ckpt: Path
    shared: int
    total: int


def _train(base_dir: Path, data: Encoded, out_dir: Path, cfg: TrainConfig, *, identity: dict[str, Any], resume: bool,
           stop_after_step: int | None, on_step: Callable[[int, int, float], None] | None,
           loaded: tuple[Any, Any] | None, device: Any, amp_dtype: Any, t0: float) -> TrainResult:
    torch, _, _ = require_training()
    tok, base = loaded if loaded is not None else load_base(base_dir, device)
    model = attach_lora(base, cfg, data.level_ids if cfg.form == "decision" else None)
    identity = {**cfg.identity(), **identity}
    shared = 0 if (cfg.gradient_checkpointing or cfg.form != "decision") else shared_prefix(data.ids)
    pad = tok.pad_token_id
    lev = torch.tensor(data.level_ids or [], dtype=torch.long, device=device)
    tgt = torch.tensor(data.targets, dtype=torch.float32) if data.targets is not None else None
    ckpt = out_dir / "checkpoint"
    state = load_checkpoint(ckpt, torch) if resume else None
    if state is not None and state["identity"] != identity:
        diff = sorted(k for k in set(identity) | set(state["identity"]) if state["identity"].get(k) != identity.get(k))
        raise InputError(f"the checkpoint there was made with other settings or data ({', '.join(diff)}); "
                         "use another --out, or --fresh to start again", file=ckpt)

    def loss_of(idx: list[int], backward: bool) -> float:
        loss = batch_loss(model, data, idx, shared, pad, lev, tgt, torch, device, amp_dtype, cfg.tokens_per_pass,
                          backward)
        release_memory()  # what the pass freed goes back to the system before the next one (see _passes)
        return loss

    run = _Run(model, data, cfg, identity, [p for p in model.parameters() if p.requires_grad], loss_of, ckpt,
               shared, math.ceil(len(data.ids) / cfg.batch_size) * cfg.epochs)
    model.eval()  # the base's own dropout stays off (gradients flow all the same): a step is a pure function of
    # the weights and the batch, and the probe below reads the states the judge will see; lora_dropout regularises
    if cfg.gradient_checkpointing:
        checkpoint_layers_in_eval(model)
    with interruptible_backward(model, torch):
        if state is not None:
            recipe = dict(state.get("recipe") or {"lr": cfg.lr})
        else:
            recipe = {"lr": cfg.lr}
            if cfg.level_rows and tgt is not None:
                recipe.update(probe_level_rows(model, data, shared, cfg.tokens_per_pass, pad, torch, device,
                                               amp_dtype))
            if cfg.lr_search:
                order = epoch_order(len(data.ids), cfg.seed, 0, torch)
                batches = [order[k * cfg.batch_size:(k + 1) * cfg.batch_size] for k in range(LR_TEST_STEPS)]
                recipe["lr"], recipe["lr_range_test"] = lr_range_test(model, run.params, [b for b in batches if b],
                                                                      loss_of, cfg, torch)
        step, losses, resumed_from, interrupted = _fit(run, state, recipe, stop_after_step, on_step, torch)
    if not interrupted:
        save_adapter(model, out_dir, base_dir)
    return TrainResult(out_dir, step, run.total, losses, time.perf_counter() - t0, resumed_from, interrupted,
                       device.type, {"identity": identity, "shared_prefix": shared, "recipe": recipe,
                                     "trained": trained_parameters(model)})


def _fit(run: _Run, state: dict[str, Any] | None, recipe: dict[str, Any], stop_after_step: int | None,
         on_step: Callable[[int, int, float], None] | None,
         torch: Any) -> tuple[int, list[float], int | None, bool]:
    """The optimizer steps, from the checkpoint ``state`` when given; Ctrl-C writes a checkpoint and returns.
    (steps done, loss curve, the step resumed from, interrupted)."""
    cfg, total = run.cfg, run.total
    optimizer = torch.optim.AdamW(run.params, lr=recipe["lr"], weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(total, max(1, int(cfg.warmup_frac * total))))
    step, losses, resumed_from = 0, [], None
    if state is not None:
        with torch.no_grad():
            named = dict(run.model.named_parameters())
            for k, v in state["trainable"].items():
                named[k].copy_(v.to(named[k].dtype))
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        _set_rng_state(state["rng"], torch)
        step, losses, resumed_from = int(state["step"]), list(state["losses"]), int(state["step"])
    steps_per_epoch = math.ceil(len(run.data.ids) / cfg.batch_size)
    try:
        while step < total:
            epoch, offset = divmod(step, steps_per_epoch)
            idx = epoch_order(len(run.data.ids), cfg.seed, epoch, torch)[
                offset * cfg.batch_size:(offset + 1) * cfg.batch_size]
            losses.append(_step(optimizer, functools.partial(run.loss_of, idx, True), run.params, cfg.max_grad_norm,
                                torch))
            scheduler.step()
            step += 1
            if on_step is not None:
                on_step(step, total, losses[-1])
            if step % cfg.checkpoint_every == 0 or step == total:
                save_checkpoint(run.ckpt, run.model, optimizer, scheduler, step, losses, run.identity, torch, recipe)
            if stop_after_step is not None and step >= stop_after_step and step < total:
                raise KeyboardInterrupt
    except KeyboardInterrupt:  # mid-step (a pass, a backward): that step's partial gradients are dropped
        save_checkpoint(run.ckpt, run.model, optimizer, scheduler, step, losses, run.identity, torch, recipe)
        return step, losses, resumed_from, True
    return step, losses, resumed_from, False


def trained_parameters(model: Any) -> dict[str, Any]:
    """What the adapter trains, for the card: LoRA modules and rank, the output-layer rows, parameter counts."""
    lora = sum(p.numel() for name, p in model.named_parameters() if p.requires_grad and "lora_" in name)
    rows = level_rows_param(model)
    cfg = model.peft_config["default"]
    names = cfg.target_modules if isinstance(cfg.target_modules, (set, list)) else [str(cfg.target_modules)]
    modules = sorted({str(name).rsplit(".", 1)[-1] for name in names})
    out: dict[str, Any] = {"lora_modules": modules, "lora_r": cfg.r, "lora_parameters": int(lora)}
    if rows is not None:
        out["output_layer_rows"] = {"layer": output_layer_name(model.get_base_model()),
                                    "token_ids": sorted({int(t) for t in (cfg.trainable_token_indices or {}).get(
                                        output_layer_name(model.get_base_model()), [])}),
                                    "parameters": int(rows.numel())}
    return out


def save_adapter(model: Any, adapter_dir: Path, base_dir: Path) -> None:
    """A PEFT adapter folder that scijudge loads as ``hf:<adapter_dir>`` (its config names the base's full path)."""
    import json

    base = str(Path(base_dir).resolve())
    model.peft_config["default"].base_model_name_or_path = base
    model.eval()
    model.save_pretrained(str(adapter_dir))
    cfg_file = adapter_dir / "adapter_config.json"
    data = json.loads(cfg_file.read_text(encoding="utf-8"))
    data["inference_mode"] = True
    data["base_model_name_or_path"] = base
    cfg_file.write_text(json.dumps(data, indent=2), encoding="utf-8")
