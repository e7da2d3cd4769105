"""`python -m scripts.export_intent`: export and verify the intent classifier (the code lives in `tsbatch.archive.intent.export`)."""

from tsbatch.archive.intent.export import main

if __name__ == "__main__":
    raise SystemExit(main())
