"""Automatic failover, switchover and rejoin of the primaries of a cluster's replication hostgroups
(docs/control-plane.md, "Failover")."""
