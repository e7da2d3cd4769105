"""`python -m scripts.bench_intent`: our intent handler vs the usual pad-to-128 handler (the code lives in `tsbatch.bench.intent`)."""

from tsbatch.bench.intent import main

if __name__ == "__main__":
    raise SystemExit(main())
