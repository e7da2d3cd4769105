"""`python -m scripts.build`: export, verify and package every model in models.yaml (the code lives in `tsbatch.build.pipeline`)."""

from tsbatch.build.pipeline import main

if __name__ == "__main__":
    raise SystemExit(main())
