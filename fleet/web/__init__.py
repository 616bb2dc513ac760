"""The server-rendered UI of the control plane (Django templates, htmx polling, charts)."""
