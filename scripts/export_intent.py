"""`python -m scripts.export_intent`: export and verify the intent classifier (the code lives in `tsbatch.build.intent.export`)."""

from tsbatch.build.intent.export import main

if __name__ == "__main__":
    raise SystemExit(main())
