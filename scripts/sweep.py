"""`python -m scripts.sweep`: the in-process batch-size sweep (the code lives in `tsbatch.analysis.sweep`)."""

from tsbatch.analysis.sweep import main

if __name__ == "__main__":
    raise SystemExit(main())
