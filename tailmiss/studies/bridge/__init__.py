"""The bridge: the categorical simulator started from each prompt's SFT distribution, beside the transformer's
group-size sweep (do F-GRPO Fig. 2's regimes agree?). Its section is a part of the small transformer's."""

from __future__ import annotations

from tailmiss.studies import ledger
from tailmiss.studies.bridge import figures, section
from tailmiss.studies.bridge.data import bridge_units
from tailmiss.studies.record import Study

__all__ = ["STUDY"]

STUDY = Study.of(section, figures, ledger.LLM, parent="transformer", units=bridge_units)
"""The bridge's record (:class:`~tailmiss.studies.record.Study`): a part of the small transformer's section, with its
own figure and its rows in that section's share of the ledger."""
