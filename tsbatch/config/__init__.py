"""config.properties: parsing and editing it, and its container variant."""
