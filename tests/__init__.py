"""ProxyFleet test suite."""
