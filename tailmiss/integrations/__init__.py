"""F-GRPO where people train: adapters for TRL and verl (optional extras; nothing heavy is imported here).

Submodules
----------
trl
    ``FGRPOConfig`` / ``FGRPOTrainer`` (TRL's ``GRPOTrainer`` with the focal weight) and ``TailMissCallback``
    (per-step group statistics and a per-rollout log for ``tailmiss diagnose``). Needs ``pip install "tailmiss[trl]"``.
verl
    The ``fgrpo`` advantage estimator, registered in verl through the ``verl.plugins`` entry point. Needs
    ``pip install "tailmiss[verl]"``.

Both take the group's success count :math:`X` from its rewards the way :mod:`tailmiss.diagnose` does and the
focal weight :math:`g = (1-X/N)^\\gamma` from :func:`tailmiss.objectives.focal_weight` (F-GRPO Eqs. 11-13).
"""
