"""What the proxy's two fronts share about their clients, MySQL's sessions and PostgreSQL's: the node's seats
(``mysql-max_connections`` across workers), login throttling, and which worker process serves a session."""
