"""The shared rung: a log-linear policy that shares parameters across prompts, on the narrowing task beside the
ladder's table, factorized and transformer rungs (is sharing of this simple kind enough to narrow?), and the shared
simulator from its start beside the transformer (does it predict the transformer's minority loss, and its N
shape?)."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.record import Study
from tailmiss.studies.sharing import figures, section
from tailmiss.studies.sharing.data import FRONTIER_LADDERS, N_LADDER, NARROWING_LADDER, SHARED_LADDER, sharing_units

__all__ = ["STUDY"]

STUDY = Study.of(
    section,
    figures,
    ledger.SHARING,
    families=(NARROWING_LADDER, SHARED_LADDER, N_LADDER, *FRONTIER_LADDERS),
    units=sharing_units,
)
"""The shared rung's record (:class:`~tailmiss.studies.record.Study`): its section and figure; it reads the narrowing
ladder, the shared rung's ladder, its N shape's and its frontier's (the last three have no quick version: the first
look leaves them out). It judges one ledger claim, F-GRPO §5.1's caveat in the narrowing regime
(``fig2-zones-narrowing``), under its own section's name."""
