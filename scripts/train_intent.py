"""`python -m scripts.train_intent`: train the intent classifier and write its report (the code lives in `tsbatch.build.intent.cli`)."""

from tsbatch.build.intent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
