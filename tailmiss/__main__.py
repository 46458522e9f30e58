"""``python -m tailmiss``: the same CLI as the ``tailmiss`` command."""

from tailmiss.cli import main

if __name__ == "__main__":
    main()
