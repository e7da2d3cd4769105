"""`python -m deploy.container_config`: write or check deploy/config.container.properties (the code lives in `tsbatch.config.container_config`)."""

from tsbatch.config.container_config import main

if __name__ == "__main__":
    raise SystemExit(main())
