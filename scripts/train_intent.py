"""`python -m scripts.train_intent`: train the intent classifier and write its report (the code lives in `tsbatch.build.intent.train`)."""

from tsbatch.build.intent.train import main

if __name__ == "__main__":
    raise SystemExit(main())
