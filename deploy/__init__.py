"""Container and cluster deployment: image config, health probe, Kubernetes/KServe manifests."""
