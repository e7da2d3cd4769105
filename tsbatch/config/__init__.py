"""config.properties: parsing and editing it, checking it, and its container variant."""
