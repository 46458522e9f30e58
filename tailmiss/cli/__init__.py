"""The ``tailmiss`` command line: one module per sub-app (analytic, sim, llm, figures) and per command
(repro, diagnose).

Bad input never shows a traceback: it prints one line ``Error: ...`` on stderr
and exits with code 2. The commands live in one module per sub-app; they all
register on :data:`tailmiss.cli.app`.
"""

from __future__ import annotations

import os
import sys

from tailmiss.cli import analytic, diagnose, figures, llm, repro, sim  # noqa: F401  (each registers its commands)
from tailmiss.cli._common import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) each rank ends with :func:`os._exit` once the command
    has returned and its output is flushed. The C++ teardown of torch.distributed at interpreter
    exit (after ``destroy_process_group``, every result already written) sometimes aborts with
    ``terminate called without an active exception`` (SIGABRT); we saw it in 3 of 119
    two-rank ``sim run`` launches on a loaded 2-core machine with torch 2.13, and torchrun then
    reports the whole job failed. Skipping that teardown keeps the exit code the command chose.
    """
    from tailmiss import _dist

    if _dist.env_world_size() == 1:
        app()
        return
    try:
        app()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
