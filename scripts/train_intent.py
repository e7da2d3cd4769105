"""`python -m scripts.train_intent`: train the intent classifier and write its report (the code lives in `tsbatch.archive.intent.cli`)."""

from tsbatch.archive.intent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
