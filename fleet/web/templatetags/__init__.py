"""Template tags and filters of the web UI."""
