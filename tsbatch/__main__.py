"""``python -m tsbatch``: the installed ``tsbatch`` command, from a checkout that is not installed."""

from tsbatch.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
