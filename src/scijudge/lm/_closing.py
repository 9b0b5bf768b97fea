"""Forced closing: when a row's token budget is nearly spent, steer it to the shortest valid end of its JSON.

A grammar only says which tokens are *allowed*; a model that never closes its rationale (a random adapter does
not) would run to ``max_tokens`` and leave unparseable JSON. Once the tokens left are no more than the
*reserve* (the length of that forced path through the whole grammar, plus a margin), the decoder stops
asking the model and picks, among the tokens the grammar allows, the one that ends things soonest:
a closing quote, brace or bracket, a separator, the smallest digit, and otherwise the longest allowed token
(a key name or an enum value the grammar already fixes). The answer stays valid and ends within the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the grammar module imports this one
    from scijudge.lm._grammar import GrammarSpec

RESERVE_MARGIN = 2  # on top of the forced path from the start: the string or number a row is inside
# In order of preference: '"' first (inside a string "}" is just a character), "}" before "," so an object
# closes as soon as its required keys are in, separators before digits so a number stops after one digit.
_CLOSERS = ('"', "}", "]")
_SEPARATORS = (",", ":", " ")


class Closer:
    """Per tokenizer: the ids of closing characters and every token's length, to pick closing tokens fast."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]) -> None:
        import torch

        self.tokenizer = tokenizer
        vocab = tokenizer.get_vocab()
        specials = set(getattr(tokenizer, "all_special_ids", []) or []) | set(stop_ids)
        lengths = torch.full((vocab_size,), -1, dtype=torch.int32)
        by_text: dict[str, int] = {}
        for token, token_id in vocab.items():
            if token_id >= vocab_size or token_id in specials:
                continue
            text = tokenizer.convert_tokens_to_string([token])
            lengths[token_id] = len(text)
            if len(text) == 1:
                by_text.setdefault(text, token_id)
        self.lengths = lengths
        self.closers = [by_text[c] for c in _CLOSERS if c in by_text]
        self.digits = [by_text[d] for d in "0123456789" if d in by_text]
        self.separators = [by_text[c] for c in _SEPARATORS if c in by_text]
        self._reserves: dict[GrammarSpec, int] = {}

    def reserve(self, spec: GrammarSpec, backend: Any) -> int:
        """Tokens to keep for closing: the length of the forced path through the whole grammar (the longest
        any closing can take, give or take the string it starts in) plus a margin; cached per grammar."""
        found = self._reserves.get(spec)
        if found is None:
            import torch

            matcher = backend.matcher(spec)
            mask = torch.full((1, (self.lengths.shape[0] + 31) // 32), -1, dtype=torch.int32)
            steps = 0
            while not matcher.is_done() and steps < 100_000:
                matcher.fill_mask(mask, 0)
                token = self.choose(mask[0])
                if token is None or not matcher.accept(token):
                    break
                steps += 1
            found = self._reserves[spec] = steps + RESERVE_MARGIN
        return found

    def choose(self, bitmask_row: Any) -> int | None:
        """The allowed token that ends the answer soonest; None when the grammar allows nothing (or only stops)."""
        import torch

        def allowed(token_id: int) -> bool:
            return bool((int(bitmask_row[token_id // 32]) >> (token_id % 32)) & 1)

        for group in (self.closers, self.separators, self.digits):
            for token_id in group:
                if allowed(token_id):
                    return token_id
        shifts = torch.arange(32, dtype=torch.int32)
        bits = ((bitmask_row.to(torch.int32).unsqueeze(-1) >> shifts) & 1).view(-1)[: self.lengths.shape[0]].bool()
        scored = self.lengths.masked_fill(~bits, -1)
        best = int(scored.argmax())
        return best if int(scored[best]) > 0 else None
