"""tailmiss: how often group-relative RL updates push probability away from rare-but-correct solutions.

Subpackages, from the bottom up (an arrow never runs back up):

- ``analytic``: closed forms of F-GRPO and BroRL and pure analysis (regimes, zones, rank statistics); numpy/scipy.
- ``objectives``: advantages, the focal weight, surrogates and token losses, as registries shared by the
  simulator, the trainer and the integrations (torch).
- ``sim``: the batched categorical-policy simulator.
- ``llm``: the small-transformer trainer (model, tasks, rollouts, update, evaluation, checkpoints).
- ``experiments``: presets, sweeps, ladders, the process pool and the bridge: what runs the trainer and simulator.
- ``integrations``: F-GRPO for TRL and verl; ``diagnose``: a real run's per-rollout log against Lemma 3.1.
- ``studies``: one package per part of the paper (theory, simulation, the transformer's sweeps, bridge, ladder,
  protocol, controls, narrowing), each with its data, claims, section text, figures and one ``Study`` record; the shared
  context, run families, noise rule, ledger catalogue and text and figure helpers beside them.
- ``report``: the studies listed once (the figure registry with them), ``paper_repro.md`` assembled from their
  sections, and its stamps; assembly only.
- ``evidence``: the units the report reads held against the evidence archive; the report made, re-derived from the
  archive and checked against it; a long regeneration in parts.
- ``cli``: the ``tailmiss`` command, one module per sub-app.

Modules at the package root, each small and imported by several layers (which is why none sits in a subpackage):

- ``_checks.py``: the one validation vocabulary (a ValueError naming the bad value) of every layer.
- ``_device.py``: the device choice shared by the simulator and the trainer.
- ``_dist.py``: torch.distributed plumbing shared by the simulator and the trainer under torchrun.
- ``_hash.py``: the counter-based hash that makes every random draw of the simulator and trainer reproducible.
- ``io.py``: atomic files and folders and strict TOML, so nothing half-written lands on disk in any layer.
- ``store.py``: the one result store (checksums, provenance, the code fingerprint that keys every cache).
- ``archive.py``: the evidence archive in the repository, which the store reads as a read-only tier of its cache.
- ``_units.py``: the words of every reuse decision (a unit's state, a lookup's outcome, a kind of unit), shared by the
  store and the archive.
- ``_provenance.py``: what a unit records of where it was made besides its code (host, git revision, CPU seconds).
- ``_fingerprint.py``: what that fingerprint reads: a unit's import closure and a digest of what its code does.
- ``options.py``: RunOptions, how work runs (device, processes, threads, progress, log, cache reuse), one value
  passed to every runner, and the one progress bar of every long loop.
- ``__main__.py``: ``python -m tailmiss``, the same command line as ``tailmiss``.
"""

__version__ = "0.1.0"
