"""`python -m scripts.build`: export, verify and package every model in models.yaml (the code lives in `tsbatch.archive.pipeline`)."""

from tsbatch.archive.pipeline import main

if __name__ == "__main__":
    raise SystemExit(main())
