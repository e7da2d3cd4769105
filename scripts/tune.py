"""`python -m scripts.tune`: the SLA-driven batch-settings search through TorchServe (the code lives in `tsbatch.analysis.tune`)."""

from tsbatch.analysis.tune import main

if __name__ == "__main__":
    raise SystemExit(main())
