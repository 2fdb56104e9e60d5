"""Modal screens: confirmations and the key help."""
