"""Values every part of the core shares, importing nothing of the toolkit (the leaf layer)."""
