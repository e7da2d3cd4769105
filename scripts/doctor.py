"""`python -m scripts.doctor`: what this machine offers and what a worker here would serve (the code lives in `tsbatch.machine`)."""

from tsbatch.machine import main

if __name__ == "__main__":
    raise SystemExit(main())
