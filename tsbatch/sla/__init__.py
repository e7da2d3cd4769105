"""SLA targets (loadtest/sla.yaml), exact percentiles and the pass/fail gate."""
