"""The report's evidence: every stored unit the full report reads, what the evidence archive holds of them, and the
work that fills it or checks it.

- :mod:`~tailmiss.evidence.plan`: the units each section reads, named before any of them runs, held against the
  archive (what is missing or stale, why, at what cost), and the archiving of what a command left in the cache;
- :mod:`~tailmiss.evidence.make`: the report made (its units computed or reused, then the text, then the figures);
- :mod:`~tailmiss.evidence.regenerate`: a long regeneration in parts, within a time budget;
- :mod:`~tailmiss.evidence.spot_check`: archived runs trained again and compared;
- :mod:`~tailmiss.evidence.verify`: the report re-derived from the archive alone and compared with the committed one.

It sits above :mod:`tailmiss.report` (which only assembles the report) and below :mod:`tailmiss.cli`; the archive's
format and its place in the result store are :mod:`tailmiss.archive`'s.
"""
