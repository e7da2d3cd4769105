"""The Locust plugin and locustfile behind ``tsbatch loadtest``: options, shapes, recording, the SLA web tab."""
