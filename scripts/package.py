"""`python -m scripts.package`: repackage archives with the settings of config.properties (the code lives in `tsbatch.build.package`)."""

from tsbatch.build.package import main

if __name__ == "__main__":
    raise SystemExit(main())
