"""Theory: the closed forms of F-GRPO Lemma 3.1, Prop. 3.2, Lemma H.1, Figs. 1(a), 3-5, App. N and BroRL Thm. 1 /
Cor. 3, each against brute force or its worked example."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.record import Study
from tailmiss.studies.theory import figures, section

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.THEORY)
"""The theory study's record (:class:`~tailmiss.studies.record.Study`): the report's Theory section, its figures and its
ledger rows, read from this package's ``section`` and ``figures``."""
