r"""Task (a): a multi-solution task whose whole answer space can be scored.

Prompt: a set :math:`S` of 2-4 distinct digits listed in a preference order,
e.g. ``<bos> 7 2 9 _ <sep>``. Answer: exactly ``num_digits`` digits then
``<eos>``. Correct iff every digit of the answer lies in :math:`S`.

Why this task. The paper's question is how group-relative RL redistributes
probability *among* correct solutions, so the task needs

* several correct answers per prompt (:math:`|S|^K`: 8, 27 or 64 at K = 3) in a
  finite answer space small enough to score exhaustively (:math:`10^K`
  well-formed answers; at most :math:`10^4`), so that :math:`\mu_{pos}(x)`,
  every correct answer's mass and the retained mass are *exact*;
* a rule a small transformer learns in minutes and applies to prompts it never
  saw (the verifier is local: each digit is checked against the prompt), so the
  SFT model's answer distribution is shaped by the data knobs below rather than
  by the model's failure to learn the task.

The SFT data distribution (the "teacher") draws the K digits i.i.d.:

.. math::

    P(d) = (1-\epsilon_x)\, w_x(d)\,[d \in S] + \frac{\epsilon_x}{10-|S|}\,[d \notin S],
    \qquad w_x(d) \propto (\mathrm{rank}_x(d) + 1)^{-\alpha}

with three knobs:

* ``mu_mean``: the mean of the Beta distribution below, i.e. one minus the
  share of incorrect answers; the defaults give ten levels from 0.005 to 0.95
  with mean 0.63 (exact pass@256 of 0.72 at the hardest level), so the SFT model starts near the paper's
  :math:`\mu_{pos} \approx 0.6`;
* ``difficulty_concentration``: per-prompt difficulty spread. The teacher's
  correct share :math:`\mu^*_x = (1-\epsilon_x)^K` takes one of ten levels (the
  deciles of a Beta distribution with mean ``mu_mean`` and this concentration,
  clipped to [``mu_min``, ``mu_max``]), chosen by the prompt's first-listed
  digit, a feature the model learns quickly, so held-out prompts inherit the
  spread. With uniform difficulty, exact pass@256 would be about 1 everywhere;
* ``zipf_exponent`` :math:`\alpha`: skew among correct answers. The first-listed
  digit is the favourite, so the all-favourite string is the anchor and strings
  of late-listed digits form a long rare tail (the paper's anchor / leaf
  structure, F-GRPO App. J).

``incorrect`` says where the teacher's :math:`\epsilon_x` goes: ``"digits"``
(above: the digits outside :math:`S`, uniformly) or ``"blank"`` (the unused
token ``_``, which makes the answer malformed, hence incorrect). A small
transformer learns the first as a near-uniform law on hard prompts: its correct
mass stays near :math:`(|S|/10)^K` (0.064 at :math:`|S| = 4, K = 3`) however
small :math:`\mu^*_x` is, because matching it means avoiding the listed digits.
The blank rate is a function of the difficulty level alone, which the model
learns, so ``"blank"`` gives SFT models with correct masses far below 1/256 on
hard prompts (pass@256 unsaturated, as on AIME).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np
import torch

from tailmiss.llm.tasks.base import BOS, EOS, SEP, SPECIAL_TOKENS, AnswerSet, Task, Vocab

__all__ = ["MultiSolutionTask", "DigitSetPrompt"]

_DIGIT0 = len(SPECIAL_TOKENS)  # id of "0"
_EMPTY = _DIGIT0 + 10  # id of "_", an unused slot of the prompt
_LEVELS = 10
INCORRECT = ("digits", "blank")


@dataclass(frozen=True)
class DigitSetPrompt:
    """The allowed digits, favourite first."""

    allowed: tuple[int, ...]

    def __str__(self) -> str:
        return " ".join(map(str, self.allowed))


def _check_int(name: str, value, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")


def _check_open(name: str, value, lo: float, hi: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo < value < hi:
        raise ValueError(f"{name} must be a number in ({lo:g}, {hi:g}), got {value!r}")


@dataclass(frozen=True)
class MultiSolutionTask(Task):
    """Digit strings over a prompt's allowed set; see the module docstring.

    Parameters
    ----------
    num_digits : int
        Answer length K (1-4); the answer space has :math:`10^K` well-formed answers.
    min_allowed, max_allowed : int
        Size range of the allowed set :math:`S` (drawn uniformly).
    mu_mean : float
        Mean of the Beta distribution of correct shares (before clipping).
    difficulty_concentration : float
        Concentration of the Beta distribution of per-prompt correct shares;
        smaller spreads prompts further apart.
    mu_min, mu_max : float
        Clip range of the per-prompt correct share.
    zipf_exponent : float
        :math:`\\alpha` of the preference weights among allowed digits.
    difficulty_seed : int
        Which first digit gets which difficulty level.
    heldout_fraction : float
        Share of prompts in the held-out ``"test"`` split.
    incorrect : {"digits", "blank"}
        Where the teacher's incorrect mass goes (module docstring).
    """

    name: ClassVar[str] = "multisolution"
    enumerable: ClassVar[bool] = True

    num_digits: int = 3
    min_allowed: int = 2
    max_allowed: int = 4
    mu_mean: float = 0.65
    difficulty_concentration: float = 0.5
    mu_min: float = 0.005
    mu_max: float = 0.95
    zipf_exponent: float = 1.5
    difficulty_seed: int = 0
    heldout_fraction: float = 0.1
    incorrect: str = "digits"

    def __post_init__(self) -> None:
        _check_int("num_digits", self.num_digits, 1, 4)
        _check_int("min_allowed", self.min_allowed, 1, 9)
        _check_int("max_allowed", self.max_allowed, self.min_allowed, 9)
        _check_open("mu_mean", self.mu_mean, 0, 1)
        _check_open("difficulty_concentration", self.difficulty_concentration, 0, 1e6)
        _check_open("mu_min", self.mu_min, 0, 1)
        _check_open("mu_max", self.mu_max, self.mu_min, 1)
        if (
            not isinstance(self.zipf_exponent, (int, float))
            or isinstance(self.zipf_exponent, bool)
            or not (0 <= self.zipf_exponent < math.inf)
        ):
            raise ValueError(f"zipf_exponent must be a finite number >= 0, got {self.zipf_exponent!r}")
        _check_int("difficulty_seed", self.difficulty_seed, 0, 2**32 - 1)
        if not isinstance(self.heldout_fraction, (int, float)) or not 0 <= self.heldout_fraction < 1:
            raise ValueError(f"heldout_fraction must lie in [0, 1), got {self.heldout_fraction!r}")
        if self.incorrect not in INCORRECT:
            raise ValueError(f"incorrect must be one of 'digits', 'blank', got {self.incorrect!r}")
        digits = tuple(str(d) for d in range(10))
        object.__setattr__(self, "vocab", Vocab(SPECIAL_TOKENS + digits + ("_",)))
        object.__setattr__(self, "prompt_len", self.max_allowed + 2)
        object.__setattr__(self, "max_answer_len", self.num_digits + 1)

    # -- SFT data distribution ---------------------------------------------------------
    @cached_property
    def _levels(self) -> np.ndarray:
        """The correct share of each first digit; on first use (only the SFT data needs it, so RL runs never load
        scipy). ``betaincinv`` is the Beta quantile of ``scipy.stats.beta.ppf``, without importing scipy.stats."""
        from scipy.special import betaincinv

        k = self.difficulty_concentration
        deciles = betaincinv(self.mu_mean * k, (1 - self.mu_mean) * k, (np.arange(_LEVELS) + 0.5) / _LEVELS)
        levels = np.clip(deciles, self.mu_min, self.mu_max)
        return np.random.default_rng(self.difficulty_seed).permutation(levels)

    def target_mu_pos(self, prompt: DigitSetPrompt) -> float:
        """Correct share :math:`\\mu^*_x` of the SFT data for ``prompt``."""
        return float(self._levels[prompt.allowed[0]])

    def teacher_digit_probs(self, prompt: DigitSetPrompt) -> np.ndarray:
        r"""The SFT teacher's distribution over the ten digits at every answer position (float64; sums to 1, or to
        :math:`1-\epsilon_x` with ``incorrect = "blank"``, the rest being the blank token's)."""
        allowed = list(prompt.allowed)
        eps = 1.0 - self.target_mu_pos(prompt) ** (1.0 / self.num_digits)
        weights = (np.arange(len(allowed)) + 1.0) ** -float(self.zipf_exponent)
        spread = 0.0 if self.incorrect == "blank" else eps / (10 - len(allowed))
        probs = np.full(10, spread)
        probs[allowed] = (1.0 - eps) * weights / weights.sum()
        return probs

    def teacher_answer_probs(self, prompt: DigitSetPrompt) -> np.ndarray:
        """Teacher probability of every answer of :meth:`enumerate_answers`, in its order."""
        p = self.teacher_digit_probs(prompt)
        out = np.ones(1)
        for _ in range(self.num_digits):
            out = np.outer(out, p).reshape(-1)
        return out

    def sft_answer(self, prompt: DigitSetPrompt, rng: np.random.Generator) -> list[int]:
        probs = self.teacher_digit_probs(prompt)
        if self.incorrect == "digits":
            return [_DIGIT0 + int(d) for d in rng.choice(10, size=self.num_digits, p=probs)] + [EOS]
        laws = np.append(probs, max(0.0, 1.0 - probs.sum()))  # the last entry: the blank token
        picks = rng.choice(11, size=self.num_digits, p=laws / laws.sum())
        return [_DIGIT0 + int(i) if i < 10 else _EMPTY for i in picks] + [EOS]

    @cached_property
    def _sft_rows(self) -> dict:
        """Per prompt, on first use: its token ids and the law :meth:`sft_answer` draws each digit from (the ten
        digits' teacher probabilities, or with ``incorrect = "blank"`` the eleven of digits and blank, normalised
        exactly as :meth:`sft_answer` normalises them)."""
        return {}

    def _sft_row(self, prompt: DigitSetPrompt) -> tuple[list[int], np.ndarray]:
        row = self._sft_rows.get(prompt)
        if row is None:
            probs = self.teacher_digit_probs(prompt)
            if self.incorrect != "digits":
                laws = np.append(probs, max(0.0, 1.0 - probs.sum()))
                probs = laws / laws.sum()
            row = self._sft_rows[prompt] = (self.prompt_tokens(prompt), probs)
        return row

    def sft_batch(self, prompts, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Teacher-forcing batch (:meth:`Task.sft_batch`), built with array operations.

        The same batch, bit for bit, as the base class's loop of :meth:`sft_answer` over ``prompts``: that loop
        draws :math:`K` uniforms :math:`u` per prompt from ``rng`` in order (``Generator.choice`` with ``p``) and
        picks digit :math:`d` when :math:`F(d-1) \le u < F(d)`, :math:`F` the law's cumulative sum divided by its
        last entry; here one ``rng.random((B, K))`` draws the same uniforms and the digit is the count of
        :math:`F` values at or below :math:`u`. Every answer has :math:`K` digits and ``<eos>``, so the batch
        has no padding."""
        n, c = len(prompts), 10 if self.incorrect == "digits" else 11
        rows = [self._sft_row(p) for p in prompts]
        tokens = np.array([r[0] for r in rows], dtype=np.int64).reshape(n, self.prompt_len)
        cdf = np.cumsum(np.array([r[1] for r in rows], dtype=np.float64).reshape(n, c), axis=1)
        cdf /= cdf[:, -1:]
        u = rng.random((n, self.num_digits))
        picks = (cdf[:, None, :] <= u[:, :, None]).sum(axis=2)
        answers = np.where(picks < 10, _DIGIT0 + picks, _EMPTY)
        ids = np.concatenate([tokens, answers, np.full((n, 1), EOS, dtype=np.int64)], axis=1)
        mask = np.zeros(ids.shape, dtype=bool)
        mask[:, self.prompt_len :] = True
        return torch.from_numpy(ids), torch.from_numpy(mask)

    # -- prompts and verifier ----------------------------------------------------------------
    def _random_prompt(self, rng: np.random.Generator) -> DigitSetPrompt:
        m = int(rng.integers(self.min_allowed, self.max_allowed + 1))
        return DigitSetPrompt(tuple(int(d) for d in rng.choice(10, size=m, replace=False)))

    def prompt_tokens(self, prompt: DigitSetPrompt) -> list[int]:
        slots = [_DIGIT0 + d for d in prompt.allowed] + [_EMPTY] * (self.max_allowed - len(prompt.allowed))
        return [BOS, *slots, SEP]

    def is_correct(self, prompt: DigitSetPrompt, answer: list[int]) -> bool:
        if len(answer) != self.num_digits + 1 or answer[-1] != EOS:
            return False
        allowed = {_DIGIT0 + d for d in prompt.allowed}
        return all(t in allowed for t in answer[:-1])

    def enumerate_answers(self, prompt: DigitSetPrompt) -> AnswerSet:
        """All :math:`10^K` well-formed answers in lexicographic order, with their correctness."""
        k = self.num_digits
        digits = np.indices((10,) * k).reshape(k, -1).T  # (10^K, K), lexicographic rows
        tokens = np.concatenate([_DIGIT0 + digits, np.full((len(digits), 1), EOS)], axis=1)
        correct = np.isin(digits, prompt.allowed).all(axis=1)
        return AnswerSet(
            tokens=torch.from_numpy(tokens).long(),
            lengths=torch.full((len(digits),), k + 1, dtype=torch.long),
            correct=torch.from_numpy(correct),
        )
