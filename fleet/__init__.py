"""ProxyFleet's control plane: the Django project that stores, versions and pushes proxy configs."""
