"""The toolkit around the handlers: build archives, run and load TorchServe, analyse batching.

Folders by concern: ``build`` (models.yaml -> verified artifacts -> .mar), ``config``
(config.properties tools), ``client`` (the one TorchServe client: process, token, load,
/metrics), ``workloads`` (request pools and answer checks), ``sla`` (targets and the gate),
``locust`` (the Locust plugin behind loadtest/locustfile.py), ``analysis`` (sweep, tune,
plots) and ``bench``. Nothing here is packaged into a .mar: handlers/ stays self-contained.
"""
