"""The model kinds: everything the toolkit knows about one kind of model, each in its folder
(``image/``, ``text/``), listed in ``registry``. Generic code asks the registry, never a name."""
