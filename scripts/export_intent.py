"""`python -m scripts.export_intent`: export and verify the intent classifier (the code lives in `tsbatch.kinds.text.export`)."""

from tsbatch.kinds.text.export import main

if __name__ == "__main__":
    raise SystemExit(main())
