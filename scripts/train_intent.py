"""`python -m scripts.train_intent`: train the intent classifier and write its report (the code lives in `tsbatch.kinds.text.cli`)."""

from tsbatch.kinds.text.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
