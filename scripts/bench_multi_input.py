"""`python -m scripts.bench_multi_input`: images/s with several images per request vs one (the code lives in `tsbatch.bench.multi_input`)."""

from tsbatch.bench.multi_input import main

if __name__ == "__main__":
    raise SystemExit(main())
