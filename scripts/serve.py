"""`python -m scripts.serve`: start, stop or inspect the TorchServe of `make serve` (the code lives in `tsbatch.client.daemon`)."""

from tsbatch.client.daemon import main

if __name__ == "__main__":
    raise SystemExit(main())
