"""The image classifier kind's worker side: decoding (PIL or on the device, the decode
pool, reduced-size JPEG decoding), its config and its errors. Travels in each of its
archives beside batchkit and ``image_classifier_handler.py``."""
