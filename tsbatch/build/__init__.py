"""The build pipeline: models.yaml -> exported, verified artifacts -> model-store/*.mar."""
