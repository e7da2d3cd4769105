"""The toolkit around the handlers: build archives, run and load TorchServe, analyse batching.

Folders by concern: ``cli`` (the ``tsbatch`` command, one subcommand per job), ``archive``
(models.yaml -> verified artifacts -> .mar), ``config`` (config.properties tools),
``client`` (the one TorchServe client: token, load, /metrics), ``server`` (running
TorchServe), ``workloads`` (request pools and answer checks), ``sla`` (targets and the
gate), ``locust`` (the Locust plugin and locustfile behind ``tsbatch loadtest``),
``analysis`` (sweep, tune, plots) and ``bench``. Nothing here is packaged into a .mar:
handlers/ stays self-contained.
"""
