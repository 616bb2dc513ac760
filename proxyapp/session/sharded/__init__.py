"""A session's statements on sharded tables, carried out: where a query or an execute runs (``router``), over several
shards (``scatter``), in a transaction over shards (``transactions``), its rows numbered from a sequence
(``numbering``), prepared statements on sharded tables (``statements``). What to do is decided by the pure functions
of ``proxyapp.sharding`` (``plan``, ``placement``)."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
