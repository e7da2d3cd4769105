"""The archive build: models.yaml -> exported, verified artifacts -> model-store/*.mar."""
