"""`python -m scripts.split_intents`: split data/intents/raw into train/val/test (the code lives in `tsbatch.kinds.text.split`)."""

from tsbatch.kinds.text.split import main

if __name__ == "__main__":
    raise SystemExit(main())
