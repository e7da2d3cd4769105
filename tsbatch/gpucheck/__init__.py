"""The GPU check driver: serve both models on the device, compare precisions (scripts/gpu_check.sh)."""
