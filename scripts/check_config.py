"""`python -m scripts.check_config`: explain mistakes in config.properties and stale archives (the code lives in `tsbatch.config.check`)."""

from tsbatch.config.check import main

if __name__ == "__main__":
    raise SystemExit(main())
