"""The Locust plugin behind loadtest/locustfile.py: options, shapes, recording, the SLA web tab."""
