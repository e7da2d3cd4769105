"""What load generators send and expect: image and utterance pools, response schema checks."""
