"""One batched decoding loop for the local engine: shared-prefix prefill, per-row grammars, stops and logprobs.

Why not ``model.generate``: each row of a batch may carry its own JSON grammar, token budget, stop strings,
temperature and logprob request, and rows that share a long prompt prefix (the judge's system prompt) should
compute it once. This loop calls the model's forward with an explicit attention mask and explicit position ids,
so left padding (and the padding between a shared prefix and each row's own suffix) changes nothing but
floating-point rounding: batched greedy output equals unbatched greedy output.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scijudge.lm._grammar import GrammarBackend, GrammarSpec, Matcher
from scijudge.lm._prefix import PrefixStore, left_pad, prefix_pass
from scijudge.lm.kv_cache import forward_names, new_cache

logger = logging.getLogger("scijudge.lm.local")

MIN_SHARED_PREFIX = 32  # tokens; shorter common prefixes are not worth a second prefill pass
COMPACT = 0.75  # drop finished rows from the batch once at most this share of its rows is still running


@dataclass
class Row:
    """One generation request as the decoder sees it."""

    input_ids: list[int]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    grammar: GrammarSpec | None = None
    backend: GrammarBackend | None = None  # who enforces ``grammar``; None = unconstrained
    logprobs: int | None = None
    reserve: int = 0  # with a grammar: once this few tokens are left, force the shortest valid ending


@dataclass
class TokenScore:
    """The chosen token's logprob and the top alternatives, all as (token id, logprob)."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class RowResult:
    """What one row produced."""

    token_ids: list[int]
    text: str
    finish_reason: str  # "stop" | "length"
    scores: list[TokenScore] | None
    scores_complete: bool = True
    grammar_backend: str | None = None
    forced_tokens: int = 0  # tokens chosen by forced closing rather than by the model


@dataclass
class _State:
    """Mutable per-row decoding state."""

    row: Row
    matcher: Matcher | None
    generator: Any
    out: list[int] = field(default_factory=list)
    scores: list[TokenScore] = field(default_factory=list)
    text_lengths: list[int] = field(default_factory=list)
    finish: str | None = None
    cut: int | None = None  # character offset of a stop string in the decoded text
    forced: int = 0


class ModelCaller:
    """Calls a causal LM forward with the keyword names this transformers version uses (``kv_cache``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache_kw, self.keep_kw = forward_names(model)

    def new_cache(self) -> Any:
        """An empty dynamic KV cache for the model."""
        return new_cache(self.model)

    def __call__(self, input_ids: Any, attention_mask: Any, position_ids: Any, cache: Any) -> Any:
        """Run one forward pass and return the float32 logits of the last position, shape [batch, vocab]."""
        kwargs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "use_cache": True,
            self.cache_kw: cache,
        }
        if self.keep_kw:
            kwargs[self.keep_kw] = 1
        out = self.model(**kwargs)
        return out.logits[:, -1, :].float()


def _groups_by_prefix(rows: Sequence[Row]) -> list[tuple[int, list[int]]]:
    """Cluster rows whose prompts share at least MIN_SHARED_PREFIX leading tokens: [(prefix length, rows)].

    Groups are runs of the rows in sorted order; n rows sharing p tokens save (n - 1) * p tokens of prefill, and
    the runs are chosen to save the most (dynamic programming over at most a batch of rows). So rows of two
    rubrics that share only the boilerplate before the rubric text become two groups, each sharing boilerplate
    and rubric, rather than one group sharing the boilerplate alone.
    """
    order = sorted(range(len(rows)), key=lambda i: rows[i].input_ids)
    ids = [rows[i].input_ids for i in order]
    n = len(ids)
    common = []  # tokens shared by neighbours in sorted order, leaving each at least one token of its own
    for k in range(n - 1):
        a, b = ids[k], ids[k + 1]
        limit = min(len(a), len(b)) - 1
        c = 0
        while c < limit and a[c] == b[c]:
            c += 1
        common.append(c)
    best = [0] * (n + 1)  # best[j]: most tokens saved by grouping the first j rows
    start = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], start[j] = best[j - 1], j - 1  # row j-1 alone
        shared = None
        for i in range(j - 2, -1, -1):  # a group of rows i..j-1
            shared = common[i] if shared is None else min(shared, common[i])
            if shared < MIN_SHARED_PREFIX:
                break
            saved = best[i] + (j - 1 - i) * shared
            if saved > best[j]:
                best[j], start[j] = saved, i
    groups: list[tuple[int, list[int]]] = []
    j = n
    while j > 0:
        i = start[j]
        members = [order[k] for k in range(i, j)]
        length = min(common[i : j - 1]) if j - 1 > i else len(ids[i]) - 1
        groups.append((length, members))
        j = i
    return groups[::-1]


def _prefill(call: ModelCaller, rows: Sequence[Row], pad_id: int, torch: Any, device: Any,
             store: PrefixStore | None = None) -> tuple[Any, Any, Any]:
    """Prefill the prompts; a prefix shared by several rows is computed once (and, with a ``store``, a prefix an
    earlier batch computed is reused). Returns (logits, mask, cache)."""
    groups = _groups_by_prefix(rows)
    if len(groups) == len(rows) and store is None:  # nothing shared: one left-padded pass
        cache = call.new_cache()
        ids, mask = left_pad([r.input_ids for r in rows], pad_id, torch, device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return call(ids, mask, positions, cache), mask, cache
    # Pass 1: each group's shared prefix once, left-padded across groups.
    prefixes = [rows[members[0]].input_ids[:length] for length, members in groups]
    cache, prefix_mask = prefix_pass(call, prefixes, pad_id, torch, device, store)
    group_of = [0] * len(rows)
    start_of = [0] * len(rows)
    for g, (length, members) in enumerate(groups):
        for i in members:
            group_of[i], start_of[i] = g, length
    select = torch.tensor(group_of, dtype=torch.long, device=device)
    cache.batch_select_indices(select)  # repeat each group's prefix KV for its rows
    # Pass 2: every row's own suffix, padded between the prefix and the suffix.
    suffixes = [r.input_ids[start_of[i] :] for i, r in enumerate(rows)]
    ids, suffix_mask = left_pad(suffixes, pad_id, torch, device)
    starts = torch.tensor(start_of, dtype=torch.long, device=device).unsqueeze(1)
    positions = starts + (suffix_mask.cumsum(-1) - 1).clamp(min=0)
    mask = torch.cat([prefix_mask[select], suffix_mask], dim=1)
    return call(ids, mask, positions, cache), mask, cache


class _Masker:
    """Turns packed grammar bitmasks into boolean masks and spots rows whose grammar only allows stopping."""

    def __init__(self, vocab_size: int, stop_ids: Sequence[int], torch: Any, device: Any) -> None:
        self.torch = torch
        self.vocab_size = vocab_size
        self.words = (vocab_size + 31) // 32
        self.device = device
        stop_only = torch.zeros(self.words, dtype=torch.int64)
        for t in stop_ids:
            stop_only[t // 32] |= 1 << (t % 32)
        self.not_stop = (~stop_only).to(torch.int32)
        self.shifts = torch.arange(32, dtype=torch.int32, device=device)

    def allocate(self, rows: int) -> Any:
        return self.torch.full((rows, self.words), -1, dtype=self.torch.int32)

    def only_stop(self, bitmask_row: Any) -> bool:
        """True when the grammar allows nothing but a stop token (the JSON value is complete)."""
        return not bool((bitmask_row & self.not_stop).any())

    def unpack(self, bitmask: Any) -> Any:
        """[rows, words] int32 -> [rows, vocab] bool on the model's device."""
        packed = bitmask.to(self.device, non_blocking=True)
        bits = (packed.unsqueeze(-1) >> self.shifts) & 1
        return bits.view(packed.shape[0], -1)[:, : self.vocab_size].bool()


def decode_batch(
    model: Any,
    rows: Sequence[Row],
    *,
    stop_ids: Sequence[int],
    pad_id: int,
    detokenize: Callable[[list[int]], str],
    store: PrefixStore | None = None,
) -> list[RowResult]:
    """Generate for all rows in one batch and return one result per row, in order (``store``: prompt prefixes
    kept across batches, ``scijudge.lm._prefix``)."""
    import torch

    call = ModelCaller(model)
    device = model.get_input_embeddings().weight.device
    vocab_size = int(model.get_output_embeddings().weight.shape[0])
    stop_set = set(stop_ids)
    states: list[_State] = []
    for row in rows:
        matcher = row.backend.matcher(row.grammar) if (row.backend is not None and row.grammar is not None) else None
        generator = None
        if row.temperature > 0 and row.seed is not None:
            generator = torch.Generator(device=device)
            generator.manual_seed(row.seed)
        states.append(_State(row, matcher, generator))
    masker = _Masker(vocab_size, stop_ids, torch, device) if any(s.matcher for s in states) else None

    with torch.inference_mode():
        logits, mask, cache = _prefill(call, rows, pad_id, torch, device, store)
        next_pos = torch.tensor([len(r.input_ids) for r in rows], dtype=torch.long, device=device)
        active = list(range(len(rows)))  # rows in the batch tensors; finished ones leave it in bulk (see COMPACT)
        bitmask = _fill_masks(masker, states, active)
        while True:
            if bitmask is not None and masker is not None:
                logits = logits.masked_fill(~masker.unpack(bitmask), float("-inf"))
            forced = _forced_closing(states, active, bitmask)
            chosen, scores = _choose(logits, [states[i] for i in active], torch, forced)
            for slot, i in enumerate(active):
                if states[i].finish is None:
                    _advance(states[i], chosen[slot], scores[slot] if scores else None, stop_set, detokenize)
            bitmask = _fill_masks(masker, states, active)
            if bitmask is not None and masker is not None:
                for slot, i in enumerate(active):
                    state = states[i]
                    if state.finish is None and state.matcher is not None and masker.only_stop(bitmask[slot]):
                        state.finish = "stop"  # the JSON value is complete; skip the forced end-of-turn step
            live = [slot for slot, i in enumerate(active) if states[i].finish is None]
            if not live:
                break
            if len(live) <= COMPACT * len(active):
                index = torch.tensor(live, dtype=torch.long, device=device)
                cache.batch_select_indices(index)  # copies the KV cache: done in bulk, not per finished row
                mask, next_pos = mask[index], next_pos[index]
                if bitmask is not None:
                    bitmask = bitmask[live]
                active = [active[slot] for slot in live]
            last = [states[i].out[-1] if states[i].out else pad_id for i in active]
            tokens = torch.tensor(last, dtype=torch.long, device=device).unsqueeze(1)
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            logits = call(tokens, mask, next_pos.unsqueeze(1), cache)
            next_pos = next_pos + 1
    return [_result(state, detokenize) for state in states]


def _fill_masks(masker: _Masker | None, states: list[_State], active: list[int]) -> Any:
    """Packed allowed-token masks for the active rows (all bits set for rows without a grammar), or None."""
    if masker is None:
        return None
    bitmask = masker.allocate(len(active))
    by_backend: dict[int, tuple[GrammarBackend, list[tuple[Matcher, int]]]] = {}
    for slot, i in enumerate(active):
        state = states[i]
        if state.matcher is not None and state.finish is None and state.row.backend is not None:
            backend = state.row.backend
            by_backend.setdefault(id(backend), (backend, []))[1].append((state.matcher, slot))
    for backend, todo in by_backend.values():
        backend.fill_masks(todo, bitmask)
    return bitmask


def _forced_closing(states: list[_State], active: list[int], bitmask: Any) -> dict[int, int]:
    """Slots whose budget is nearly spent, with the token that closes their JSON soonest (see ``_closing``)."""
    forced: dict[int, int] = {}
    if bitmask is None:
        return forced
    for slot, i in enumerate(active):
        state = states[i]
        row = state.row
        if state.matcher is None or state.finish is not None or row.reserve <= 0:
            continue
        if row.max_new_tokens - len(state.out) <= row.reserve and row.backend is not None:
            token = row.backend.closer.choose(bitmask[slot])
            if token is not None:
                forced[slot] = token
                state.forced += 1
    return forced


def _choose(
    logits: Any, states: list[_State], torch: Any, forced: dict[int, int] | None = None
) -> tuple[list[int], list[TokenScore] | None]:
    """Pick the next token of every active row (forced, greedy or sampled) and its logprobs when asked for."""
    greedy = logits.argmax(dim=-1)
    chosen = greedy.tolist()
    for slot, token in (forced or {}).items():
        chosen[slot] = token
    for slot, state in enumerate(states):
        row = state.row
        if row.temperature <= 0 or state.finish is not None or (forced and slot in forced):
            continue
        scaled = logits[slot] / row.temperature
        if row.top_k:
            kth = torch.topk(scaled, min(row.top_k, scaled.shape[-1])).values[-1]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1)
        if row.top_p is not None and row.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            drop = sorted_probs.cumsum(-1) - sorted_probs > row.top_p
            sorted_probs[drop] = 0.0
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        chosen[slot] = int(torch.multinomial(probs, 1, generator=state.generator).item())
    wanted = [s.row.logprobs for s in states]
    if all(w is None for w in wanted):
        return chosen, None
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(1, torch.tensor(chosen, device=logp.device).unsqueeze(1)).squeeze(1).tolist()
    k = max((w or 0) for w in wanted)
    top_values = top_ids = None
    if k > 0:
        top = torch.topk(logp, min(k, logp.shape[-1]), dim=-1)
        top_values, top_ids = top.values.tolist(), top.indices.tolist()
    scores: list[TokenScore] = []
    for slot, want in enumerate(wanted):
        alternatives: list[tuple[int, float]] = []
        if want and top_ids is not None and top_values is not None:
            pairs = zip(top_ids[slot][:want], top_values[slot][:want], strict=True)
            alternatives = [(tid, val) for tid, val in pairs if val > float("-inf")]
        scores.append(TokenScore(chosen[slot], float(picked[slot]), alternatives))
    return chosen, scores


def _advance(
    state: _State, token: int, score: TokenScore | None, stop_set: set[int], detokenize: Callable[[list[int]], str]
) -> None:
    """Feed one chosen token to a row: grammar, end-of-turn, stop strings, token budget."""
    if state.matcher is not None and not state.matcher.accept(token):
        logger.error("grammar backend rejected a token it had allowed (id %d); ending this row", token)
        state.finish = "stop"
        return
    if token in stop_set:
        state.finish = "stop"
        return
    state.out.append(token)
    if score is not None and state.row.logprobs is not None:
        state.scores.append(score)
    if state.row.stop:
        text = detokenize(state.out)
        state.text_lengths.append(len(text))
        hits = [text.find(s) for s in state.row.stop if s in text]
        if hits:
            state.cut = min(hits)
            state.finish = "stop"
            return
    if state.matcher is not None and state.matcher.is_done():
        state.finish = "stop"
    elif len(state.out) >= state.row.max_new_tokens:
        state.finish = "length"


def _result(state: _State, detokenize: Callable[[list[int]], str]) -> RowResult:
    """Assemble a row's text, finish reason and logprobs (trimmed to the text before a stop string)."""
    text = detokenize(state.out)
    scores = state.scores if state.row.logprobs is not None else None
    complete = True
    if state.cut is not None:
        text = text[: state.cut]
        kept = sum(1 for length in state.text_lengths if length <= state.cut)  # tokens wholly before the stop
        scored = state.text_lengths[kept - 1] if kept else 0
        complete = scored == state.cut  # False when the stop string starts inside a token
        if scores is not None:
            scores = scores[:kept]
    return RowResult(
        token_ids=list(state.out),
        text=text,
        finish_reason=state.finish or "length",
        scores=scores,
        scores_complete=complete,
        grammar_backend=state.row.backend.name if state.matcher is not None and state.row.backend is not None else None,
        forced_tokens=state.forced,
    )
