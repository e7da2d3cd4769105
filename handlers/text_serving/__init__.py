"""The text classifier kind's worker side: tokenizing and length-sorted padding, its
config and its errors. Travels in each of its archives beside batchkit and
``text_classifier_handler.py``."""
