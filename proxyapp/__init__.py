"""ProxyFleet's data plane: an asyncio MySQL proxy configured the way ProxySQL is (never imports Django)."""
