"""Decision judging on the local engine: P(level) at the answer position from one prefill pass, no generation.

A decision row is a prompt plus the token paths of the levels the model may write there (``1`` .. ``5``, or
verdict labels such as ``satisfied`` / ``not_satisfied``). :func:`decide_batch` runs the prompts of one batch
through the model once:

* pass 1 computes each shared prompt prefix once (rows are clustered with the decoder's own
  ``_groups_by_prefix``: with the item-first layout every rubric of one item shares the item's tokens), left
  padded across the groups; its KV rows are repeated for the group's rows (``DynamicCache.batch_select_indices``);
* pass 2 runs every row's own suffix plus the "feed" tokens of multi-token levels (padding sits between prefix
  and suffix; explicit position ids make it invisible) and projects only the positions that are read
  (``logits_to_keep``).

Levels that span several tokens (``10`` on a tokenizer that splits digits, or word labels) are scored by
chaining: a trie of the level paths, and at every branching node the softmax restricted to the allowed next
tokens (plus the end-of-answer token where one level ends and another continues) -- the distribution a decoder
constrained to the level set would draw from. Single-token levels therefore give exactly "softmax of the logits
at the answer position, gathered at the level tokens, renormalised"; all-equal logits give exactly uniform
probabilities whenever the levels' first tokens differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scijudge.lm._decode import MIN_SHARED_PREFIX, ModelCaller, _groups_by_prefix
from scijudge.lm._prefix import PrefixStore, prefix_pass

DEFAULT_MAX_BATCH_TOKENS = 1 << 16  # rows x padded width of one pass 2 (bounds activation and KV memory)


@dataclass(frozen=True)
class Plan:
    """Which logits a decision reads: every trie node (a token prefix) with its allowed next tokens, and the
    token sequences fed after the prompt so those nodes are reached (one extra row per distinct feed)."""

    paths: tuple[tuple[int, ...], ...]
    children: dict[tuple[int, ...], tuple[int, ...]]
    feeds: tuple[tuple[int, ...], ...]
    depth: int
    end_id: int | None


def plan_levels(paths: Sequence[Sequence[int]], end_id: int | None) -> Plan:
    """The plan for a set of level token paths; a level set that is not prefix-free needs ``end_id``."""
    tpaths = tuple(tuple(int(t) for t in p) for p in paths)
    if not tpaths or any(not p for p in tpaths):
        raise ValueError("every level needs at least one token")
    if len(set(tpaths)) != len(tpaths):
        raise ValueError("two levels have the same token path")
    as_set = set(tpaths)
    prefix_free = not any(p != q and q[: len(p)] == p for p in tpaths for q in tpaths)
    if not prefix_free and end_id is None:
        raise ValueError("the levels are not prefix-free (e.g. 1 and 10 with split digits) and the model has no "
                         "end-of-answer token to tell them apart")
    children: dict[tuple[int, ...], set[int]] = {}
    for p in tpaths:
        for i in range(len(p)):
            children.setdefault(p[:i], set()).add(p[i])
    for node in list(children):
        if node in as_set:  # a level ends here and another continues: the end of the answer competes
            children[node].add(int(end_id))  # type: ignore[arg-type]
    needed = [n for n, c in children.items() if len(c) > 1 or n == ()]
    deep = [n for n in needed if n and not any(m != n and m[: len(n)] == n for m in needed)]
    feeds = tuple(sorted(deep)) or ((),)
    return Plan(tpaths, {n: tuple(sorted(children[n])) for n in needed}, feeds, max(len(f) for f in feeds), end_id)


@dataclass
class DecideRow:
    """One decision request as the batch worker sees it: the prompt and the plan of its levels."""

    input_ids: list[int]
    plan: Plan


@dataclass
class LevelScores:
    """The model's distribution over the levels (renormalised, in the order asked) and the raw probability mass
    the levels' first tokens had at the answer position (low = the model wanted to write something else)."""

    probs: list[float]
    coverage: float


def decide_batch(model: Any, rows: Sequence[DecideRow], *, pad_id: int,
                 max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS, store: PrefixStore | None = None) -> list[LevelScores]:
    """Level distributions of ``rows`` (prefill only), in order; rows sharing a plan are run together (``store``:
    prompt prefixes kept across batches, ``scijudge.lm._prefix``)."""
    import torch

    out: list[LevelScores | None] = [None] * len(rows)
    by_plan: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        by_plan.setdefault(id(row.plan), []).append(i)
    call = ModelCaller(model)
    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        for members in by_plan.values():
            plan = rows[members[0]].plan
            for chunk in _chunks(members, rows, plan, max_batch_tokens):
                scores = _decide(call, [rows[i].input_ids for i in chunk], plan, pad_id, torch, device, store)
                for i, score in zip(chunk, scores, strict=True):
                    out[i] = score
    return [s for s in out if s is not None]


def _chunks(members: list[int], rows: Sequence[DecideRow], plan: Plan, budget: int) -> list[list[int]]:
    """Consecutive rows whose pass-2 cost (rows x feeds x width) stays within ``budget`` (at least one row)."""
    chunks: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in members:
        new_width = max(width, len(rows[i].input_ids) + plan.depth)
        if current and (len(current) + 1) * len(plan.feeds) * new_width > budget:
            chunks.append(current)
            current, new_width = [], len(rows[i].input_ids) + plan.depth
        current.append(i)
        width = new_width
    if current:
        chunks.append(current)
    return chunks


class _Ids:
    """Adapter so ``_groups_by_prefix`` (which reads ``.input_ids``) clusters plain prompts."""

    def __init__(self, input_ids: list[int]) -> None:
        self.input_ids = input_ids


def _decide(call: ModelCaller, prompts: list[list[int]], plan: Plan, pad_id: int, torch: Any,
            device: Any, store: PrefixStore | None = None) -> list[LevelScores]:
    feeds, depth = plan.feeds, plan.depth
    n_feeds = len(feeds)
    rows: Any = [_Ids(p) for p in prompts]  # _groups_by_prefix reads only .input_ids
    groups = _groups_by_prefix(rows)
    cache = call.new_cache()
    row_prompt = [i for i in range(len(prompts)) for _ in range(n_feeds)]
    row_feed = [f for _ in prompts for f in feeds]
    shared = store is not None or any(length >= MIN_SHARED_PREFIX and len(members) > 1 for length, members in groups)
    if shared:  # pass 1: each group's shared prefix once, left-padded across groups (or from the store)
        group_of = [0] * len(prompts)
        start_of = [0] * len(prompts)
        for g, (length, members) in enumerate(groups):
            for i in members:
                group_of[i], start_of[i] = g, length
        prefixes = [prompts[members[0]][:length] for length, members in groups]
        cache, prefix_mask = prefix_pass(call, prefixes, pad_id, torch, device, store)
        select = torch.tensor([group_of[i] for i in row_prompt], dtype=torch.long, device=device)
        cache.batch_select_indices(select)  # repeat each group's prefix KV for its rows (a copy: bounded by budget)
        start = [start_of[i] for i in row_prompt]
        head_mask: Any = prefix_mask[select]
    else:
        start = [0] * len(row_prompt)
        head_mask = None
    # pass 2: suffix + feed, right-aligned so the answer position is the same column in every row
    suffix = [prompts[i][start[r]:] for r, i in enumerate(row_prompt)]
    width = max(len(s) for s in suffix)
    ids = torch.full((len(suffix), width + depth), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, (s, f) in enumerate(zip(suffix, row_feed, strict=True)):
        ids[r, width - len(s):width] = torch.tensor(s, dtype=torch.long)
        mask[r, width - len(s):width] = 1
        if f:
            ids[r, width:width + len(f)] = torch.tensor(f, dtype=torch.long)
        mask[r, width:] = 1  # feed (and trailing pad): after the answer column, so never read before it
    ids, mask = ids.to(device), mask.to(device)
    starts = torch.tensor(start, dtype=torch.long, device=device).unsqueeze(1)
    positions = starts + (mask.cumsum(-1) - 1).clamp(min=0)
    full_mask = mask if head_mask is None else torch.cat([head_mask, mask], dim=1)
    logits = _last_logits(call, ids, full_mask, positions, cache, depth + 1)  # [rows, depth+1, vocab]
    logp = torch.log_softmax(logits.double(), dim=-1)
    base = torch.arange(len(prompts), device=device) * n_feeds
    per_node: dict[tuple[int, ...], Any] = {}
    for node in plan.children:
        row = next(k for k, feed in enumerate(feeds) if feed[: len(node)] == node)
        per_node[node] = logp[base + row, len(node), :]
    probs = _combine(per_node, plan, torch)
    root = per_node[()]
    first = torch.tensor(sorted({p[0] for p in plan.paths}), device=root.device)
    coverage = root[:, first].exp().sum(-1)
    return [LevelScores(probs[r].tolist(), float(coverage[r])) for r in range(len(prompts))]


def _last_logits(call: ModelCaller, ids: Any, mask: Any, positions: Any, cache: Any, keep: int) -> Any:
    """The logits of the last ``keep`` positions (``keep`` >= 1: transformers reads 0 as "all positions")."""
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": positions,
                              "use_cache": True, call.cache_kw: cache}
    if call.keep_kw:
        kwargs[call.keep_kw] = keep
    return call.model(**kwargs).logits[:, -keep:, :].float()


def _combine(logp: dict[tuple[int, ...], Any], plan: Plan, torch: Any) -> Any:
    """[rows, levels] probabilities: at each branching node, softmax restricted to its allowed children."""
    rows = next(iter(logp.values())).shape[0]
    score = torch.zeros(rows, len(plan.paths), dtype=torch.float64)
    for j, p in enumerate(plan.paths):
        steps = [(p[:i], p[i]) for i in range(len(p))]
        if p in plan.children:  # a level that ends where another continues: its end token is read
            steps.append((p, int(plan.end_id)))  # type: ignore[arg-type]
        for node, token in steps:
            if node not in plan.children:
                continue  # a node with one allowed child contributes log 1
            lp = logp[node]
            allowed = torch.tensor(plan.children[node], device=lp.device)
            lp = lp - torch.logsumexp(lp[:, allowed], dim=-1, keepdim=True)
            score[:, j] += lp[:, token].cpu()
    return torch.softmax(score, dim=-1)


def level_paths(encode: Any, levels: Sequence[str], context: str) -> list[tuple[int, ...]]:
    """Token ids of each level as written right after ``context`` (the prompt text up to the answer).

    ``encode(text) -> list[int]``. Encodes ``context + level`` and strips the encoding of ``context``; a level
    that does not tokenize as an extension of the context (a merge across the boundary) is a ValueError.
    """
    ctx = list(encode(context))
    out = []
    for level in levels:
        ids = list(encode(context + str(level)))
        if ids[: len(ctx)] != ctx or len(ids) == len(ctx):
            raise ValueError(f"level {level!r} does not tokenize as an extension of the prompt")
        out.append(tuple(ids[len(ctx):]))
    return out


__all__ = ["DecideRow", "LevelScores", "Plan", "decide_batch", "level_paths", "plan_levels"]
