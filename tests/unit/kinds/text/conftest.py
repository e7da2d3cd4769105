"""The tiny intent fixtures (a local BERT folder, a CLINC150-style file) live in
tests/conftest.py: the integration tests build tiny intent archives from them too."""
