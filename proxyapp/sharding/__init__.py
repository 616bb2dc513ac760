"""Sharding: the shard map of a config (which tables are sharded, over which shards) and the plan of a statement on
sharded tables (which shards it goes to, or why it is refused); docs/sharding.md."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
