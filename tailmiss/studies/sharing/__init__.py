"""The shared rung: a log-linear policy that shares parameters across prompts, on the narrowing task beside the
ladder's table, factorized and transformer rungs (is sharing of this simple kind enough to narrow?)."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.record import Study
from tailmiss.studies.sharing import figures, section

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.NARROWING, families=("narrowing-ladder",))
"""The shared rung's record (:class:`~tailmiss.studies.record.Study`): its section and figure; it reads the narrowing
ladder (a registered family) and the shared ladder (``narrowing-ladder-shared``, trained when first asked for). It
judges no ledger claim."""
