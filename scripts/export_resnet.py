"""`python -m scripts.export_resnet`: export and verify the ResNet classifier (the code lives in `tsbatch.kinds.image.export`)."""

from tsbatch.kinds.image.export import main

if __name__ == "__main__":
    raise SystemExit(main())
