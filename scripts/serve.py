"""`python -m scripts.serve`: start, stop or inspect the TorchServe of `make serve` (the code lives in `tsbatch.server.daemon`)."""

from tsbatch.server.daemon import main

if __name__ == "__main__":
    raise SystemExit(main())
