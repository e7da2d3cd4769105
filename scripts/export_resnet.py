"""`python -m scripts.export_resnet`: export and verify the ResNet classifier (the code lives in `tsbatch.build.resnet.export`)."""

from tsbatch.build.resnet.export import main

if __name__ == "__main__":
    raise SystemExit(main())
