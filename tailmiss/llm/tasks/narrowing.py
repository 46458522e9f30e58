r"""The narrowing task: task (a) with a conflict between prompts that the policy cannot resolve from the prompt.

RL on task (a) raises coverage: an answer is correct exactly when it uses the
prompt's digits, a rule that every prompt's update teaches, so every prompt
gains. This task keeps task (a)'s prompts, teacher and answer space (every
metric stays exact) and adds one conflict. A fixed share of the prompts,
picked by a salted hash of the allowed tuple (a feature a model can at best
memorise on training prompts and never infer on held-out ones), are
*minority* prompts, on which the rule of the other (*rest*) prompts is wrong:

* ``conflict_rule = "complement"``: a minority answer is correct iff **no**
  digit lies in :math:`S` (the two types' correct sets are disjoint: "use the
  listed digits" is right on the rest and wrong on the minority);
* ``conflict_rule = "no-favourite"``: a minority answer is correct iff every
  digit lies in :math:`S \setminus \{s_1\}` (the favourite digit is forbidden;
  answers over :math:`S \setminus \{s_1\}` are right on both types, so the
  conflict can be resolved without seeing the type).

On minority prompts the teacher moves the share ``conflict_strength`` of the
mass the rest rule would call correct to the minority's correct digits
(uniformly over the unlisted digits for ``"complement"``; to the other
allowed digits in proportion to their weights for ``"no-favourite"``): at 0
the teacher ignores the conflict, at 1 it follows it. ``conflict_visible``
adds a prompt position holding a marker (``!`` on minority prompts, ``_`` on
the rest), the control in which the type is seen; ``conflict_share = 0`` is
the control without a conflict (task (a) itself, under another name).

The held-out split is the one of task (a) (the hash of the prompt without the
marker), and held-out evaluation sets are *stratified*: ``prompts("test", n)``
holds exactly ``round(conflict_share * n)`` minority prompts, so that the
minority's share of an evaluation is the task's, not a draw's.

The module sits outside the trainer's code scope (:data:`tailmiss.store.OWN_SCOPE`),
though the task registry names it: a run of this task is keyed by the trainer's
fingerprint *and* this module's, so editing the task stales its runs and no others.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from tailmiss.llm.tasks.base import BOS, EOS, SEP, SPECIAL_TOKENS, AnswerSet, Vocab
from tailmiss.llm.tasks.multisolution import _DIGIT0, _EMPTY, DigitSetPrompt, MultiSolutionTask, _check_int

__all__ = ["NarrowingTask", "PROMPT_TYPES", "CONFLICT_RULES"]

_MARK = _EMPTY + 1  # id of "!", the minority marker (vocabulary of conflict_visible only)
PROMPT_TYPES = ("minority", "rest")
"""The two prompt types, minority first."""
CONFLICT_RULES = ("complement", "no-favourite")
"""What minority prompts call correct (module docstring)."""


def _number(name: str, value, lo: float, hi: float, hi_open: bool) -> None:
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and lo <= value
        and (value < hi if hi_open else value <= hi)
    )
    if not ok:
        raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}{')' if hi_open else ']'}, got {value!r}")


@dataclass(frozen=True)
class NarrowingTask(MultiSolutionTask):
    """Task (a) with a hidden conflict between prompt types (module docstring).

    Parameters
    ----------
    conflict_share : float
        Share of prompts (in [0, 1)) of the minority type; 0: no conflict.
    conflict_strength : float
        In [0, 1]: the share of the teacher's rest-correct mass moved to the
        minority's correct digits on minority prompts.
    conflict_visible : bool
        Whether a marker token in the prompt tells the type (control).
    conflict_seed : int
        Salt of the hash that picks the minority prompts.
    conflict_rule : {"complement", "no-favourite"}
        What minority prompts call correct.

    The other parameters are :class:`~tailmiss.llm.tasks.MultiSolutionTask`'s.
    """

    name: ClassVar[str] = "narrowing"
    prompt_types: ClassVar[tuple[str, ...]] = PROMPT_TYPES
    """What :meth:`prompt_type` returns (``RLConfig.train_types`` names some of them)."""

    conflict_share: float = 0.25
    conflict_strength: float = 0.5
    conflict_visible: bool = False
    conflict_seed: int = 0
    conflict_rule: str = "complement"

    def __post_init__(self) -> None:
        super().__post_init__()
        _number("conflict_share", self.conflict_share, 0.0, 1.0, hi_open=True)
        _number("conflict_strength", self.conflict_strength, 0.0, 1.0, hi_open=False)
        if not isinstance(self.conflict_visible, bool):
            raise ValueError(f"conflict_visible must be true or false, got {self.conflict_visible!r}")
        _check_int("conflict_seed", self.conflict_seed, 0, 2**32 - 1)
        if self.conflict_rule not in CONFLICT_RULES:
            raise ValueError(f"conflict_rule must be one of {', '.join(CONFLICT_RULES)}, got {self.conflict_rule!r}")
        if self.conflict_rule == "no-favourite" and self.min_allowed < 2 and self.conflict_share > 0:
            raise ValueError("conflict_rule 'no-favourite' needs min_allowed >= 2 (a minority forbids one digit)")
        if self.conflict_visible:
            digits = tuple(str(d) for d in range(10))
            object.__setattr__(self, "vocab", Vocab(SPECIAL_TOKENS + digits + ("_", "!")))
            object.__setattr__(self, "prompt_len", self.max_allowed + 3)

    # -- prompt types ----------------------------------------------------------------------
    def prompt_type(self, prompt: DigitSetPrompt) -> str:
        """``"minority"`` or ``"rest"``: a salted hash of the allowed tuple, the same whether or not the type is
        visible; always ``"rest"`` at ``conflict_share = 0``."""
        if self.conflict_share <= 0:
            return "rest"
        key = bytes([0x7C, *prompt.allowed]) + int(self.conflict_seed).to_bytes(4, "little")
        u = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") / 2.0**64
        return "minority" if u < self.conflict_share else "rest"

    def minority_mask(self, prompts) -> np.ndarray:
        """Boolean array: which of ``prompts`` are minority prompts."""
        return np.array([self.prompt_type(p) == "minority" for p in prompts], dtype=bool)

    def correct_digits(self, prompt: DigitSetPrompt) -> tuple[int, ...]:
        """The digits a correct answer may use: :math:`S` on rest prompts; on minority prompts the digits outside
        :math:`S` (``"complement"``) or :math:`S` less the favourite (``"no-favourite"``)."""
        if self.prompt_type(prompt) == "rest":
            return tuple(prompt.allowed)
        if self.conflict_rule == "complement":
            return tuple(d for d in range(10) if d not in prompt.allowed)
        return tuple(prompt.allowed[1:])

    # -- teacher ---------------------------------------------------------------------------
    def teacher_digit_probs(self, prompt: DigitSetPrompt) -> np.ndarray:
        r"""Task (a)'s teacher on rest prompts; on minority prompts the share :math:`s` = ``conflict_strength`` of
        the allowed digits' mass moves to the unlisted digits, uniformly (``"complement"``), or that share of the
        favourite's mass to the other allowed digits (``"no-favourite"``)."""
        probs = super().teacher_digit_probs(prompt)
        s = float(self.conflict_strength)
        if self.prompt_type(prompt) == "rest" or s == 0:
            return probs
        allowed = list(prompt.allowed)
        if self.conflict_rule == "complement":
            outside = [d for d in range(10) if d not in allowed]
            moved = s * probs[allowed].sum()
            probs[allowed] *= 1.0 - s
            probs[outside] += moved / len(outside)
            return probs
        weights = probs[allowed[1:]]
        moved = s * probs[allowed[0]]
        probs[allowed[0]] -= moved
        probs[allowed[1:]] += moved * weights / weights.sum()
        return probs

    # -- prompts, splits and verifier ------------------------------------------------------
    def _slots(self, prompt: DigitSetPrompt) -> list[int]:
        return [_DIGIT0 + d for d in prompt.allowed] + [_EMPTY] * (self.max_allowed - len(prompt.allowed))

    def prompt_tokens(self, prompt: DigitSetPrompt) -> list[int]:
        if self.conflict_visible:
            mark = _MARK if self.prompt_type(prompt) == "minority" else _EMPTY
            return [BOS, mark, *self._slots(prompt), SEP]
        return [BOS, *self._slots(prompt), SEP]

    def split_of(self, prompt: DigitSetPrompt) -> str:
        """Task (a)'s split of the prompt (its tokens without the marker): the hidden task, its visible control and
        task (a) hold out the same prompts."""
        digest = hashlib.blake2b(bytes([BOS, *self._slots(prompt), SEP]), digest_size=8).digest()
        u = int.from_bytes(digest, "little") / 2.0**64
        return "test" if u < self.heldout_fraction else "train"

    def prompts(self, split: str, n: int, seed: int, distinct: bool = False) -> list:
        """Task (a)'s prompts of ``split``; a ``"test"`` draw with a conflict is stratified: exactly
        ``round(conflict_share * n)`` minority prompts, each type's prompts in the order of task (a)'s draw from the
        same seed (the other type's are skipped once its quota is full)."""
        if split != "test" or self.conflict_share <= 0:
            return super().prompts(split, n, seed, distinct)
        left = {"minority": round(self.conflict_share * n)}
        left["rest"] = n - left["minority"]
        out = []
        super().prompts(split, 0, seed, distinct)  # its argument checks
        for p in self._stream(split, n, seed, distinct):
            kind = self.prompt_type(p)
            if left[kind] > 0:
                left[kind] -= 1
                out.append(p)
                if len(out) == n:
                    break
        return out

    def is_correct(self, prompt: DigitSetPrompt, answer: list[int]) -> bool:
        if len(answer) != self.num_digits + 1 or answer[-1] != EOS:
            return False
        allowed = {_DIGIT0 + d for d in self.correct_digits(prompt)}
        return all(t in allowed for t in answer[:-1])

    def enumerate_answers(self, prompt: DigitSetPrompt) -> AnswerSet:
        """All :math:`10^K` well-formed answers in lexicographic order, with their correctness under this prompt's
        rule."""
        answers = super().enumerate_answers(prompt)
        k = self.num_digits
        digits = answers.tokens[:, :k].numpy() - _DIGIT0
        correct = np.isin(digits, self.correct_digits(prompt)).all(axis=1)
        return AnswerSet(tokens=answers.tokens, lengths=answers.lengths, correct=torch.from_numpy(correct))
