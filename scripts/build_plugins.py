"""`python -m scripts.build_plugins`: compile the TorchServe frontend plugins into build/plugins/ (the code lives in `tsbatch.archive.plugins`)."""

from tsbatch.archive.plugins import main

if __name__ == "__main__":
    raise SystemExit(main())
