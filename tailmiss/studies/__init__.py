"""The studies: one package per part of the paper, each with its data, claims, section text and figures.

``tailmiss/studies/<part>/`` holds ``data`` (which runs and simulations it reads, through :mod:`tailmiss.studies.runs`
and the simulator's cache), ``claims`` (each of the paper's claims as numbers and a verdict, by the one noise rule of
:mod:`tailmiss.studies.rule`), ``section`` (the report's text and the ledger's rows: its ``HEADING``, its writer
``write`` and, for a study the report may leave out, ``DEFERRED_WHY``) and ``figures`` (its
:class:`~tailmiss.studies.figure.FigureSpec` list, ``FIGURES``), and one :class:`~tailmiss.studies.record.Study`
record, ``STUDY``, in its ``__init__``, read from that layout by :meth:`~tailmiss.studies.record.Study.of` with what
only the record says (families, claims, parent). The modules at this level serve every study: where results live
(:mod:`~tailmiss.studies.context`, :mod:`~tailmiss.studies.runs`), the noise rule, the claims ledger's catalogue
(:mod:`~tailmiss.studies.ledger`, read from ``claims.toml``), text and figure helpers (:mod:`~tailmiss.studies.text`,
:mod:`~tailmiss.studies.style`, :mod:`~tailmiss.studies.figure`) and the record type. A study imports these and other
studies' public names, never the report (:mod:`tailmiss.report` lists the studies, assembles the report and stamps
it).
"""
