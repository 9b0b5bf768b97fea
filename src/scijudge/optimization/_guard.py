"""Checks on optimized instructions: they must keep the judge's inputs and invent no fields.

DSPy optimizers rewrite instruction text only; the signature's input fields stay. What can go wrong is
the text: a rewrite that stops referring to an input the original instructions relied on ("compare the
synthesis with the papers" becoming "rate the synthesis"), or one that refers to a field the judge does
not have (a ``{context}`` placeholder, a ``[[ ## notes ## ]]`` marker). The rule here:

- every input the BASE instructions mention (its name, singular or plural, ``_`` read as a space) must
  still be mentioned; inputs the base text never names are exempt (the prompt lists every input anyway);
- no ``{name}`` / ``{{name}}`` placeholder or ``[[ ## name ## ]]`` marker may name an unknown field.

During optimization a candidate that breaks the rule is not sent at all: the judge answers with an
abstention (score 0), so optimizers drop it without spending LM calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scijudge.spec.signatures import OUTPUT_FIELD, render_instructions
from scijudge.spec.judge_spec import JudgeSpec

_PLACEHOLDER = re.compile(r"\{\{?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}?\}")
_MARKER = re.compile(r"\[\[\s*##\s*([A-Za-z_][A-Za-z0-9_]*)\s*##\s*\]\]")


def _variants(name: str) -> list[str]:
    spaced = name.replace("_", " ")
    forms = {name, spaced}
    for form in (name, spaced):
        forms.add(form[:-1] if form.endswith("s") else form + "s")
    return sorted(forms, key=len, reverse=True)


def mentions(text: str, name: str) -> bool:
    """Whether ``text`` refers to input ``name`` (whole words, any case, singular or plural)."""
    pattern = r"(?<![A-Za-z0-9_])(?:" + "|".join(re.escape(v) for v in _variants(name)) + r")(?![A-Za-z0-9_])"
    return re.search(pattern, text, flags=re.IGNORECASE) is not None


@dataclass(frozen=True)
class InstructionGuard:
    """What optimized instructions of one judge must satisfy (see module docstring)."""

    judge: str
    required: tuple[str, ...]
    fields: frozenset[str]

    @classmethod
    def for_spec(cls, spec: JudgeSpec) -> InstructionGuard:
        base = render_instructions(spec)
        names = [i.name for i in spec.inputs]
        required = tuple(n for n in names if mentions(base, n))
        return cls(judge=spec.name, required=required, fields=frozenset([*names, OUTPUT_FIELD]))

    def problems(self, text: str) -> list[str]:
        """Every violation in ``text`` (empty when the instructions are acceptable)."""
        found = []
        if not text.strip():
            return ["the instructions are empty"]
        for name in self.required:
            if not mentions(text, name):
                found.append(f"no longer mentions the input '{name}'")
        for pattern in (_PLACEHOLDER, _MARKER):
            for match in pattern.finditer(text):
                if match.group(1) not in self.fields:
                    found.append(f"refers to an unknown field '{match.group(1)}'")
        return sorted(set(found))
