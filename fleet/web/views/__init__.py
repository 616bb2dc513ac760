"""The UI's views, one module per page family."""
