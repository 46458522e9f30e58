r"""Checking ``tailmiss diagnose``'s advice by simulation: rare-mass retention of rollout spends at an equal budget.

A diagnosis proposes a group size :math:`N` and a focal exponent :math:`\gamma` for a run whose prompts have
success rates :math:`\mu`. :func:`simulate_spends` runs each candidate "spend" ``(N, gamma)`` on the categorical
simulator (:mod:`tailmiss.sim`) at the same number of rollouts per prompt, from one starting policy per prompt whose
rare-correct set holds :math:`\rho\mu`, and reports how much of that mass each spend keeps;
:func:`summarize_spends` turns the result into one row per spend for a table, as in
``summarize_spends(simulate_spends([0.3, 0.7], 0.1, [(8, 0.0), (32, 0.5)], 800))``.

**The simulation** (:func:`simulate_spends`). Every prompt is its own categorical policy (a table policy: no
parameter sharing, so prompts never interact, and a prompt visited in a fraction :math:`P/K` of a run's steps is simply
updated that many times). Each spend updates every prompt :math:`U_N = \max(1, \mathrm{round}(R/N))` times with groups
of :math:`N` draws (:func:`updates_for`; :math:`R` = ``rollouts_per_prompt``), so all spends use about :math:`R`
rollouts per prompt. Spends with the same :math:`N` run in one simulator call (they share every draw: each run's draws
depend on its seed, :math:`N` and step only, so their comparison is paired).

**Starting policy** (:func:`start_logits`, given to the simulator as ``init="logits"``). Actions
``0 .. num_correct - 1`` are correct. The rare-correct set :math:`E` holds :math:`\tau = \rho\mu` in
:math:`k = \lceil\rho C\rceil` equal actions (:func:`rare_set_size`); the other correct actions share
:math:`(1-\rho)\mu` equally, the incorrect ones :math:`1-\mu`. A set, not one action: the chance that an active group
misses :math:`E` depends on its total mass only, :math:`(1-\tau)^N` (F-GRPO Lemma 3.1, Eq. 8), but what a miss does to
:math:`E` depends on its members' masses. Under a log-probability policy gradient a correct action's expected logit gain
grows with its own probability, so one action holding :math:`\rho\mu` is the *heaviest* correct action once
:math:`\rho > 1/C` (:math:`\rho = 0.1`, :math:`C = 16`: 0.1μ against 0.06μ) and gains mass instead of losing it.
:math:`k \ge \rho C` makes every member no heavier than the other correct answers: :math:`E` is then the lightest
correct answers holding :math:`\rho\mu`, the rare set of the transformer's evaluations (``tailmiss.llm.evaluate``:
smallest-mass correct answers within ``rare_share`` of :math:`\mu_{pos}`). With :math:`\rho \le 1/C`, :math:`k = 1`.

**Update** (the simulator's, F-GRPO App. J / BroRL §4.1, batched over :math:`\gamma` and seeds): draw :math:`N` actions,
:math:`X` of them correct; GRPO's std-normalised group advantages :math:`A_i = (r_i - \bar r)/(\sigma + \epsilon)`
(:math:`\sigma`: the group's std, Bessel-corrected, of the binary rewards 1/0, :math:`\epsilon = 10^{-6}`; a group with
:math:`X \in \{0, N\}` has :math:`A = 0`); the focal weight :math:`g = (1 - X/N)^\gamma` (F-GRPO Eq. 12,
:func:`tailmiss.objectives.focal_weight`); ascent on :math:`\frac{g}{N}\sum_i A_i \log \pi(a_i)` over the logits with
the setting's optimizer. The advantages sum to 0, so an action that was not drawn keeps its logit and loses probability
only through the normaliser: an active group (:math:`0 < X < N`) that misses :math:`E` shrinks :math:`E`'s mass when the
drawn correct actions outweigh the drawn incorrect ones, the tail miss of F-GRPO Lemma 3.1.

**Measured** at the start and at ``points`` updates (:func:`logged_updates`), per prompt :math:`x`, then averaged over
the prompts:

``retained_mass``
    :math:`\pi_t(E\mid x) / \pi_0(E\mid x)`, the share of the rare set's starting mass it holds now (above 1 when it
    grew). Not the simulator's ``retained_mass`` metric, which is F-GRPO's
    :math:`M_{ret} = 1 - \sum_{a\ \mathrm{correct}} (\pi_0(a) - \pi_t(a))_+ / Q_{pos,0}` over *all* correct actions
    (losses only, gains ignored); that one is returned as ``m_ret``.
``q_pos``
    :math:`Q_{pos} = \sum_{a\ \mathrm{correct}} \pi_t(a)`, the correct mass (expected accuracy).

The simulator keeps only the final policy, so each logged update :math:`t` is its own simulation of :math:`t` updates
(``keep_final=True``): exactly the first :math:`t` updates of the full run, since a run's draws depend on its seed,
:math:`N` and step only. The cost is :math:`(\text{points}+1)/2` full runs, on the CPU with one torch thread for the
duration of the call (the caller's thread count is restored afterwards).

References: F-GRPO (arXiv 2602.06717): Lemma 3.1 (tail miss of an active group), Eq. 12 (focal weight), App. J (the
categorical simulation); BroRL §4.1 (the same simulation, its mass balance).

numpy / pandas at import; the simulator (torch) is imported when :func:`simulate_spends` runs, so importing this
module (or :mod:`tailmiss.diagnose`) never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from tailmiss._checks import check_bool, check_choice, check_int
from tailmiss.diagnose._simcheck_inputs import check_mu, check_rho, check_seeds, check_spends

__all__ = [
    "SETTINGS",
    "rare_set_size",
    "start_logits",
    "updates_for",
    "logged_updates",
    "simulate_spends",
    "summarize_spends",
]

# ---- the named simulator settings ---------------------------------------------------------------------------------
# The ladder's ``table-sgd-lr20`` rung (tailmiss/experiments/presets.py: LADDER_RUNGS' Rung("table", "sgd", 20.0) on
# _LADDER_RL, task MultiSolutionTask()) trains the table policy with the RL loop's GRPO defaults: binary rewards,
# std-normalised advantages with Bessel's std (RLConfig.std_kind), adv_eps 1e-6, GRPO's "token-mean" aggregation
# over the whole step's batch of prompts_per_step = 4 prompts x N rollouts x L = max_answer_len = 4 tokens (every
# well-formed answer of task (a) is 3 digits + <eos>), no weight decay, grad_clip 1 (never reached: a group's
# advantages have sum 0 and sum of squares N - 1, so sum |A_i| < N bounds a step's gradient norm by
# sqrt(4) / (4 L) = 1/8 when every rollout has L tokens). A table row's gradient is the log-probability
# policy gradient of its answers (tailmiss/llm/tabular.py), so each visit of a prompt is one simulator step with
# learning rate 20 / (4 * 4) = 1.25: tests/test_ladder.py::_sim maps a token-sum-norm loss of one prompt per step to
# lr / L, and the token mean over 4 prompts divides by 4 more (tests/test_diagnose_simcheck.py checks this mapping in
# law against the ladder's own RL settings, and rejects half and twice the rate).
_LADDER_RL_LR = 20.0
_LADDER_PROMPTS_PER_STEP = 4
_LADDER_ANSWER_TOKENS = 4
_GRPO_BINARY = dict(
    reward_correct=1.0,
    reward_incorrect=0.0,
    advantage="std",
    std_kind="bessel",
    adv_eps=1e-6,
    surrogate="logprob",
    weight_decay=0.0,
)
SETTINGS: dict[str, dict] = {
    "table-sgd-lr20": dict(
        _GRPO_BINARY, optimizer="sgd", lr=_LADDER_RL_LR / (_LADDER_PROMPTS_PER_STEP * _LADDER_ANSWER_TOKENS)
    ),
    # the simulator's F-GRPO App. J optimizer (tailmiss/sim/presets.py "fgrpo-fig2": log-prob surrogate, Adam,
    # lr 1e-2, betas (0.9, 0.999), eps 1e-8) with GRPO's std-normalised binary advantages, exactly as the bridge
    # simulates a transformer's prompts (tailmiss/experiments/bridge.py: _sim_config, DEFAULT_SIM_LR)
    "sim-adam": dict(_GRPO_BINARY, optimizer="adam", lr=1e-2, betas=(0.9, 0.999), eps=1e-8),
}
"""Named simulator settings: keyword arguments of :class:`tailmiss.sim.SimConfig` (see :func:`simulate_spends`).

Both: the log-probability surrogate, the module docstring's **Update** advantages, no weight decay, float64 logits:

``"table-sgd-lr20"``
    Plain SGD at lr 1.25: the ladder's ``table-sgd-lr20`` rung, the simulator setting whose M_ret-by-N curve predicts
    the small transformer (paper_repro.md, "The simulator setting that predicts the transformer"). That rung trains the
    table policy (``tailmiss/llm/tabular.py``) through the RL loop with SGD at lr 20
    (``tailmiss/experiments/presets.py``: ``LADDER_RUNGS``, ``_LADDER_RL``), GRPO's token-mean loss over 4 prompts x N
    rollouts x 4 answer tokens per step, so one visit of a prompt is one simulator step at 20 / (4 x 4)
    (``tests/test_ladder.py::_sim`` maps one prompt per step to lr / L; the 4 prompts divide by 4 more;
    ``tests/test_diagnose_simcheck.py`` checks the rate in law against the RL loop).
``"sim-adam"``
    Adam at lr 1e-2, betas (0.9, 0.999), eps 1e-8: the simulator's F-GRPO App. J optimizer (``tailmiss/sim/presets.py``,
    ``fgrpo-fig2``) with GRPO's advantages, as the bridge simulates (``tailmiss/experiments/bridge.py``). App. J's
    preset itself uses mean-centred ±1 rewards; with std-normalised advantages ±1 and 1/0 rewards give the same
    advantages, and Adam divides the Bessel factor out.
"""

# ---- the pieces ---------------------------------------------------------------------------------------------------


def rare_set_size(rho: float, num_correct: int) -> int:
    r"""Actions in the rare-correct set :math:`E`: the fewest, :math:`k \ge \rho C`, that keep each no heavier.

    :math:`E` holds :math:`\rho\mu` in :math:`k` equal actions, the other :math:`C - k` correct actions share
    :math:`(1-\rho)\mu`; a member is no heavier than another correct action iff
    :math:`\rho/k \le (1-\rho)/(C-k)`, i.e. :math:`k \ge \rho C`. So :math:`k = \lceil \rho C \rceil` (at least 1,
    at most :math:`C - 1`, where some correct action must stay outside :math:`E`; only :math:`\rho > 1 - 1/C`
    reaches that cap, and makes :math:`E`'s members the heavier ones).
    """
    rho = check_rho(rho)
    check_int("num_correct", num_correct, 2)
    return min(num_correct - 1, max(1, math.ceil(rho * num_correct * (1.0 - 1e-12))))


def start_logits(mu: float, rho: float, num_actions: int = 64, num_correct: int = 16) -> np.ndarray:
    r"""Starting logits of one simulated prompt: the float64 log-masses, the rare-correct set first.

    With :math:`k` = :func:`rare_set_size`: actions ``0 .. k-1`` (the rare-correct set :math:`E`) hold
    :math:`\rho\mu/k` each, actions ``k .. num_correct-1`` share :math:`(1-\rho)\mu` equally and the
    ``num_actions - num_correct`` incorrect actions share :math:`1-\mu` equally (the masses sum to 1, up to
    rounding).
    """
    if np.ndim(mu) != 0:
        raise ValueError(f"mu must be one success rate here, got {mu!r}")
    mu, rho = float(check_mu(mu)[0]), check_rho(rho)
    check_int("num_actions", num_actions, 3)
    check_int("num_correct", num_correct, 2, num_actions)
    k = rare_set_size(rho, num_correct)
    return np.log(
        np.concatenate(
            [
                np.full(k, rho * mu / k),
                np.full(num_correct - k, (1.0 - rho) * mu / (num_correct - k)),
                np.full(num_actions - num_correct, (1.0 - mu) / (num_actions - num_correct)),
            ]
        )
    )


def updates_for(rollouts_per_prompt: int, group_size: int) -> int:
    """Updates of a prompt at group size ``group_size`` under the budget: ``max(1, round(rollouts / N))``.

    Python's ``round`` (halves to even), as the ladder's equal-rollout budget (``Ladder.steps_for``).
    """
    check_int("rollouts_per_prompt", rollouts_per_prompt)
    check_int("group size N", group_size)
    return max(1, round(rollouts_per_prompt / group_size))


def logged_updates(updates: int, points: int) -> list[int]:
    """The updates logged after the start: ``round(updates * i / points)`` for ``i = 1 .. points``, distinct, >= 1."""
    check_int("updates", updates)
    check_int("points", points)
    return sorted({max(1, round(updates * i / points)) for i in range(1, points + 1)})


def simulate_spends(
    mu: np.ndarray,
    rho: float,
    spends: Sequence[tuple[int, float]],
    rollouts_per_prompt: int,
    seeds: Sequence[int] = (0, 1, 2),
    setting: str = "table-sgd-lr20",
    num_actions: int = 64,
    num_correct: int = 16,
    progress: bool = False,
    per_prompt: bool = False,
    points: int = 4,
) -> pd.DataFrame:
    r"""Rare-mass retention and accuracy of each rollout spend ``(N, gamma)`` at an equal rollout budget, simulated.

    Each prompt is its own categorical policy (:func:`start_logits`), updated :func:`updates_for` times with groups of
    :math:`N` draws. The starting policy, the update, what is measured: module docstring; settings: :data:`SETTINGS`.

    Parameters
    ----------
    mu : array_like of float
        Prompt success rates, each strictly inside (0, 1) (e.g. quantile midpoints of a run's fitted :math:`\mu`).
    rho : float
        Rare share in (0, 1): :math:`E` holds :math:`\rho\mu` of the mass.
    spends : sequence of (int, float)
        Distinct ``(N, gamma)`` pairs, :math:`N \ge 1`, :math:`\gamma \ge 0`.
    rollouts_per_prompt : int
        The budget :math:`R \ge 1`.
    seeds : sequence of int
        Distinct seeds. Prompt ``j`` of seed ``s`` runs on the simulator seed ``s * len(mu) + j``, so that no two
        prompts share draws (a bijection: seeds must be below :math:`2^{32}/` ``len(mu)``).
    setting : {"table-sgd-lr20", "sim-adam"}
    num_actions, num_correct : int
        :math:`V \ge 3` and :math:`2 \le C < V`: each prompt's answer space and its correct answers.
    progress : bool
        A progress bar over the simulator calls.
    per_prompt : bool
        Return one row per prompt too (columns ``prompt`` and ``mu`` added) instead of the mean over prompts.
    points : int
        Updates logged after the start (default 4: a quarter, half, three quarters and all of the budget).

    Returns
    -------
    pandas.DataFrame
        One row per ``(group_size, gamma, seed, updates)`` logged (and ``prompt`` with ``per_prompt``), sorted by them:
        ``group_size``, ``gamma``, ``seed``, ``updates`` (0 at the start), ``rollouts`` (``updates * group_size``),
        ``retained_mass``, ``q_pos``, ``rare_mass`` (:math:`\pi_t(E)`) and ``m_ret``, each a mean over the prompts.

    Raises
    ------
    ValueError
        Naming the bad value: ``mu`` outside (0, 1), ``rho`` outside (0, 1), :math:`N < 1`, :math:`\gamma < 0`,
        empty or repeated spends, an unknown ``setting``, a bad budget, seed, action count or ``points``.
    """
    mu, rho, spends, seeds = _checked_inputs(mu, rho, spends, rollouts_per_prompt, seeds)
    _check_options(setting, num_actions, num_correct, progress, per_prompt)
    check_int("points", points)
    plan = _spend_plan(spends, rollouts_per_prompt, points)
    frames = _simulate_prompts(_Prompts(mu, rho, seeds, num_actions, num_correct), setting, plan, progress)
    return _spend_frame(frames, per_prompt)


def _checked_inputs(mu, rho, spends, rollouts_per_prompt, seeds):
    """``mu``, ``rho``, ``spends`` and ``seeds`` checked in turn, the budget before the seeds (``ValueError``)."""
    mu = check_mu(mu)
    rho = check_rho(rho)
    spends = check_spends(spends)
    check_int("rollouts_per_prompt", rollouts_per_prompt)
    return mu, rho, spends, check_seeds(seeds, mu.size)


def _check_options(setting, num_actions, num_correct, progress, per_prompt) -> None:
    """``ValueError`` naming the first bad one of the setting, the answer space and the two flags."""
    check_choice("setting", setting, tuple(SETTINGS))
    check_int("num_actions", num_actions, 3)
    check_int("num_correct", num_correct, 2, num_actions)
    check_bool("progress", progress)
    check_bool("per_prompt", per_prompt)


def _spend_plan(spends, rollouts_per_prompt: int, points: int) -> dict[int, tuple[list[float], list[int]]]:
    """Per group size N, in the spends' order: its gammas (one simulator call) and the updates logged."""
    by_n: dict[int, list[float]] = {}
    for n, gamma in spends:
        by_n.setdefault(n, []).append(gamma)
    return {n: (gammas, logged_updates(updates_for(rollouts_per_prompt, n), points)) for n, gammas in by_n.items()}


class _Prompts(NamedTuple):
    """The simulated prompts: their success rates, the rare share, the user seeds and the answer space."""

    mu: np.ndarray
    rho: float
    seeds: tuple[int, ...]
    num_actions: int
    num_correct: int


def _simulate_prompts(prompts: _Prompts, setting: str, plan: dict, progress: bool) -> list[pd.DataFrame]:
    """Every prompt's rows at the start and at each logged update, one torch thread (restored after) meanwhile."""
    import torch  # only when simulating

    from tailmiss.sim.config import SimConfig
    from tailmiss.sim.engine import simulate

    k = rare_set_size(prompts.rho, prompts.num_correct)
    bar = None
    if progress:
        from tailmiss.options import ProgressBar

        calls = prompts.mu.size * sum(len(grid) for _, grid in plan.values())
        spends = sum(len(gammas) for gammas, _ in plan.values())
        bar = ProgressBar(total=calls, description=f"simcheck: {prompts.mu.size} prompts x {spends} spends")
    frames = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 64-action rows: more threads only wait on each other (4x slower on a busy 2-core box)
    try:
        for j, m in enumerate(prompts.mu):
            z = start_logits(float(m), prompts.rho, prompts.num_actions, prompts.num_correct)
            for n, (gammas, grid) in plan.items():
                config = SimConfig(
                    name="simcheck",
                    num_actions=prompts.num_actions,
                    num_correct=prompts.num_correct,
                    init="logits",
                    logits=tuple(float(x) for x in z),
                    group_sizes=(n,),
                    gammas=tuple(gammas),
                    seeds=tuple(s * prompts.mu.size + j for s in prompts.seeds),
                    steps=grid[-1],
                    log_every=grid[-1],
                    dtype="float64",
                    **SETTINGS[setting],
                )
                for t in grid:  # the first t updates of the run: its own simulation, the final policy kept
                    prefix = config.replace(steps=t, log_every=t)
                    result = simulate(prefix, device="cpu", progress=False, keep_final=True)
                    if t == grid[0]:
                        frames.append(_rows(result, 0, None, k, j, float(m), prompts.mu.size))
                    frames.append(_rows(result, t, result.final_probs, k, j, float(m), prompts.mu.size))
                    if bar is not None:
                        bar.update(1)
    finally:
        torch.set_num_threads(threads)
        if bar is not None:
            bar.close()
    return frames


def _spend_frame(frames: list[pd.DataFrame], per_prompt: bool) -> pd.DataFrame:
    """The rows, per prompt (``per_prompt``) or averaged over the prompts, sorted by spend, seed and update."""
    rows = pd.concat(frames, ignore_index=True)
    keys = ["group_size", "gamma", "seed", "updates", "rollouts"]
    if per_prompt:
        return rows.sort_values([*keys, "prompt"], kind="stable").reset_index(drop=True)
    return rows.drop(columns=["prompt", "mu"]).groupby(keys, as_index=False, sort=True).mean()


def _rows(result, step: int, probs, k: int, prompt: int, mu: float, prompts: int) -> pd.DataFrame:
    """One prompt's runs at ``step`` (one row each, in run order): user seeds back, the rare set's mass.

    ``probs`` is the runs' policy at ``step`` (``None`` at step 0: the starting policy, whose rare mass is the
    reference of ``retained_mass``, 1 there by definition).
    """
    h = result.history
    h = h[h["step"] == step].sort_values("run", kind="stable")
    start = float(np.exp(np.asarray(result.config.logits[:k])).sum() / np.exp(np.asarray(result.config.logits)).sum())
    rare = np.full(len(h), start) if probs is None else probs[h["run"].to_numpy(), :k].sum(1)
    group_size = h["group_size"].to_numpy()
    return pd.DataFrame(
        {
            "group_size": group_size,
            "gamma": h["gamma"].to_numpy(dtype=np.float64),
            "seed": (h["seed"].to_numpy() - prompt) // prompts,
            "updates": step,
            "rollouts": step * group_size,
            "retained_mass": np.ones(len(h)) if probs is None else rare / start,
            "q_pos": h["q_pos"].to_numpy(),
            "rare_mass": rare,
            "m_ret": h["retained_mass"].to_numpy(),
            "prompt": prompt,
            "mu": mu,
        }
    )


_SUMMARY_KEYS = ("group_size", "gamma", "seed", "updates", "rollouts", "retained_mass", "q_pos")


def summarize_spends(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per spend ``(group_size, gamma)``: the final retained rare mass and correct mass over seeds.

    Parameters
    ----------
    frame : pandas.DataFrame
        :func:`simulate_spends`'s result (per prompt or not; per-prompt rows are first averaged over prompts).

    Returns
    -------
    pandas.DataFrame
        Columns ``group_size``, ``gamma``, ``updates`` and ``rollouts`` (at the end of the budget), ``seeds``,
        ``retained_mass_mean``, ``retained_mass_sd``, ``q_pos_mean``, ``q_pos_sd``: mean and sample sd
        (``ddof=1``; NaN with one seed) over seeds of each seed's final prompt mean, sorted by group size and gamma.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be simulate_spends' DataFrame, got {type(frame).__name__}")
    missing = [c for c in _SUMMARY_KEYS if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks the column(s) {', '.join(missing)} of simulate_spends' result")
    if frame.empty:
        raise ValueError("frame has no rows")
    spend = ["group_size", "gamma"]
    runs = frame.groupby([*spend, "seed", "updates"], as_index=False)[["rollouts", "retained_mass", "q_pos"]].mean()
    last = runs.groupby([*spend, "seed"])["updates"].transform("max")
    final = runs[runs["updates"] == last]
    out = final.groupby(spend, as_index=False, sort=True).agg(
        updates=("updates", "max"),
        rollouts=("rollouts", "max"),
        seeds=("seed", "nunique"),
        retained_mass_mean=("retained_mass", "mean"),
        retained_mass_sd=("retained_mass", "std"),
        q_pos_mean=("q_pos", "mean"),
        q_pos_sd=("q_pos", "std"),
    )
    out["rollouts"] = out["rollouts"].astype(np.int64)
    return out.reset_index(drop=True)
