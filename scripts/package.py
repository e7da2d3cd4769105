"""`python -m scripts.package`: repackage archives with the settings of config.properties (the code lives in `tsbatch.archive.package`)."""

from tsbatch.archive.package import main

if __name__ == "__main__":
    raise SystemExit(main())
