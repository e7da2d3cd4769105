"""`python -m scripts.export_resnet`: export and verify the image classifier (the code lives in `tsbatch.archive.resnet.export`)."""

from tsbatch.archive.resnet.export import main

if __name__ == "__main__":
    raise SystemExit(main())
