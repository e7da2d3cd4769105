"""`python -m deploy.container_config`: write or check deploy/config.container.properties (the code lives in `tsbatch.config.profiles`)."""

from tsbatch.config.profiles import main

if __name__ == "__main__":
    raise SystemExit(main())
