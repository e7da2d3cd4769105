"""`python -m scripts.bench_resnet`: served vs in-process ResNet throughput (the code lives in `tsbatch.bench.resnet`)."""

from tsbatch.bench.resnet import main

if __name__ == "__main__":
    raise SystemExit(main())
