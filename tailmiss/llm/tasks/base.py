"""The task protocol: what every verifiable task gives the trainer.

A task is a frozen dataclass (its fields are its parameters, so a task is
rebuilt exactly from its TOML table) that provides

* a :class:`Vocab` whose first four tokens are ``<pad> <bos> <sep> <eos>``;
* prompts of one fixed length ``prompt_len`` (``<bos> ... <sep>``), drawn from
  a seed, each assigned once and for all to the ``"train"`` or the held-out
  ``"test"`` split by a hash of its tokens;
* a strict verifier :meth:`Task.reward` (1.0 / 0.0; an answer without ``<eos>``
  or with any malformed token scores 0, never raises);
* the SFT data distribution :meth:`Task.sft_answer`;
* for tasks with a finite answer space, :meth:`Task.enumerate_answers`: every
  well-formed answer with its correctness, so that answer masses can be
  computed exactly by teacher forcing.

Answers are token-id lists that end with ``<eos>``; ``max_answer_len`` counts
the ``<eos>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from tailmiss._checks import check_choice

__all__ = ["Vocab", "Task", "AnswerSet", "SPECIAL_TOKENS", "PAD", "BOS", "SEP", "EOS", "SPLITS"]

SPECIAL_TOKENS = ("<pad>", "<bos>", "<sep>", "<eos>")
"""The four tokens every task's :class:`Vocab` starts with, in this order (ids 0-3): padding, the prompt's first
token, the prompt's last token and the answer's end."""
PAD, BOS, SEP, EOS = range(4)
"""The ids 0-3 of :data:`SPECIAL_TOKENS`, in their order."""
SPLITS = ("train", "test")
"""The prompt splits: each prompt is assigned once and for all to ``"train"`` or the held-out ``"test"`` split by a
hash of its tokens (:meth:`Task.split_of`)."""


@dataclass(frozen=True)
class Vocab:
    """Token strings by id; ids 0-3 are ``<pad> <bos> <sep> <eos>``."""

    tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        if tuple(self.tokens[:4]) != SPECIAL_TOKENS:
            raise ValueError(f"a vocabulary must start with {SPECIAL_TOKENS}, got {self.tokens[:4]}")
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError("vocabulary tokens must be distinct")
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Token strings to ids; an unknown token raises ``ValueError`` naming it."""
        try:
            return [self._index[t] for t in tokens]
        except KeyError as exc:
            raise ValueError(f"unknown token {exc.args[0]!r}") from None

    def decode(self, ids: Sequence[int]) -> list[str]:
        """Ids to token strings (ids outside the vocabulary become ``'<unk>'``)."""
        n = len(self.tokens)
        return [self.tokens[i] if 0 <= i < n else "<unk>" for i in (int(x) for x in ids)]


@dataclass(frozen=True)
class AnswerSet:
    """Every well-formed answer of one prompt.

    Attributes
    ----------
    tokens : LongTensor, shape (M, L)
        Answer ids ending with ``<eos>``, right-padded with ``<pad>``.
    lengths : LongTensor, shape (M,)
        Tokens per answer, ``<eos>`` included.
    correct : BoolTensor, shape (M,)
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    correct: torch.Tensor


def cut_at_eos(answer: Sequence[int]) -> list[int] | None:
    """The answer up to and including its first ``<eos>``, or ``None`` when it has none."""
    ids = [int(x) for x in answer]
    try:
        return ids[: ids.index(EOS) + 1]
    except ValueError:
        return None


class Task:
    """Base class of the verifiable tasks (subclasses are frozen dataclasses).

    Subclasses set ``name``, ``enumerable``, and in ``__post_init__`` the
    attributes ``vocab``, ``prompt_len`` and ``max_answer_len``, and declare a
    field ``heldout_fraction`` (share of prompts in the ``"test"`` split); they implement
    ``_random_prompt``, :meth:`prompt_tokens`, :meth:`is_correct` and
    :meth:`sft_answer` (and :meth:`enumerate_answers` when ``enumerable``).
    """

    name: ClassVar[str] = ""
    enumerable: ClassVar[bool] = False
    vocab: Vocab
    prompt_len: int
    max_answer_len: int
    heldout_fraction: float

    # -- to implement ------------------------------------------------------------
    def _random_prompt(self, rng: np.random.Generator) -> Any:
        """One prompt drawn from the task's prompt distribution (any split)."""
        raise NotImplementedError

    def prompt_tokens(self, prompt) -> list[int]:
        """Token ids of ``prompt``: exactly ``prompt_len`` ids, ``<bos>`` first, ``<sep>`` last."""
        raise NotImplementedError

    def is_correct(self, prompt, answer: list[int]) -> bool:
        """Verifier on an answer that ends with its first ``<eos>``."""
        raise NotImplementedError

    def sft_answer(self, prompt, rng: np.random.Generator) -> list[int]:
        """One answer from the SFT data distribution (ids ending with ``<eos>``)."""
        raise NotImplementedError

    def enumerate_answers(self, prompt) -> AnswerSet:
        """Every well-formed answer of ``prompt`` (finite answer spaces only)."""
        raise NotImplementedError(f"task {self.name!r} has no finite answer space to enumerate")

    # -- shared --------------------------------------------------------------------
    def split_of(self, prompt) -> str:
        """``"test"`` for the held-out share of prompts, else ``"train"`` (a stable hash of the tokens)."""
        digest = hashlib.blake2b(bytes(self.prompt_tokens(prompt)), digest_size=8).digest()
        u = int.from_bytes(digest, "little") / 2.0**64
        return "test" if u < self.heldout_fraction else "train"

    def prompts(self, split: str, n: int, seed: int, distinct: bool = False) -> list:
        """``n`` prompts of ``split`` drawn from ``seed`` (deterministic).

        With ``distinct=True`` no prompt repeats (``ValueError`` if the split is
        too small); otherwise prompts are i.i.d. draws.
        """
        check_choice("split", split, SPLITS)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        return list(itertools.islice(self._stream(split, n, seed, distinct), n))

    def prompts_where(self, split: str, n: int, seed: int, keep, distinct: bool = False) -> list:
        """The first ``n`` prompts of :meth:`prompts`'s draw of ``split`` from ``seed`` for which ``keep(prompt)``
        holds, in the draw's order (the others are skipped): ``ValueError`` once ``1000 n + 10,000`` drawn prompts in
        a row fail ``keep``."""
        check_choice("split", split, SPLITS)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        out, missed, limit = [], 0, 1000 * max(n, 1) + 10_000
        for prompt in self._stream(split, n, seed, distinct):
            if len(out) == n:
                break
            if keep(prompt):
                out.append(prompt)
                missed = 0
            else:
                missed += 1
                if missed > limit:
                    raise ValueError(f"no {split!r} prompt of {self} passes the filter in {limit} draws in a row")
        return out

    def _stream(self, split: str, n: int, seed: int, distinct: bool):
        """The prompts of ``split`` drawn from ``seed``, one at a time, without an end: ``ValueError`` once
        ``1000 n + 10,000`` tries in a row bring no new prompt (a split too small for ``n`` distinct ones)."""
        rng = np.random.default_rng([int(seed), SPLITS.index(split), 0x7A11])
        seen, tries, limit = set(), 0, 1000 * max(n, 1) + 10_000
        while True:
            tries += 1
            if tries > limit:
                raise ValueError(f"could not draw {n} {'distinct ' if distinct else ''}{split!r} prompts from {self}")
            prompt = self._random_prompt(rng)
            if self.split_of(prompt) != split:
                continue
            if distinct:
                key = tuple(self.prompt_tokens(prompt))
                if key in seen:
                    continue
                seen.add(key)
            tries = 0
            yield prompt

    def reward(self, prompt, answer: Sequence[int]) -> float:
        """1.0 if the answer (cut at its first ``<eos>``) is correct, else 0.0; never raises on bad output."""
        cut = cut_at_eos(answer)
        if cut is None or len(cut) > self.max_answer_len:
            return 0.0
        try:
            return 1.0 if self.is_correct(prompt, cut) else 0.0
        except (ValueError, IndexError, KeyError):
            return 0.0

    def encode_prompts(self, prompts: Sequence) -> torch.Tensor:
        """LongTensor (B, prompt_len) of the prompts' ids."""
        return torch.tensor([self.prompt_tokens(p) for p in prompts], dtype=torch.long)

    def sft_batch(self, prompts: Sequence, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forcing batch: ids (B, prompt_len + max_answer_len) and a loss mask on answer tokens."""
        width = self.prompt_len + self.max_answer_len
        ids = torch.full((len(prompts), width), PAD, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.bool)
        for i, prompt in enumerate(prompts):
            answer = self.sft_answer(prompt, rng)
            seq = self.prompt_tokens(prompt) + answer
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, self.prompt_len : len(seq)] = True
        return ids, mask

    def to_dict(self) -> dict:
        """The task's TOML table: ``name`` plus its parameters."""
        return {"name": self.name, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}
