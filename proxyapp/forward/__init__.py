"""Forwarding listeners: ports that pass whole TCP connections to a hostgroup of PostgreSQL servers, reading
nothing of what passes but the first message (``forwarding``: the listeners and their servers; ``relay``: one
connection, both ways)."""
