"""The check of config.properties against models.yaml, the built archives and the tuner's reports."""
