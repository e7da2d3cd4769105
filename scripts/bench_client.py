"""`python -m scripts.bench_client`: the load client's CPU per request vs a threaded requests loop (the code lives in `tsbatch.bench.client_overhead`)."""

from tsbatch.bench.client_overhead import main

if __name__ == "__main__":
    raise SystemExit(main())
