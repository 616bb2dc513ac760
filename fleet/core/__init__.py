"""Core control-plane app: management commands shared by the whole product."""
