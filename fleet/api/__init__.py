"""The REST API (Django REST framework) under ``/api/v1/``; see docs/control-plane.md."""
