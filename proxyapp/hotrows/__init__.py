"""Hot rows: transactions that touch the same hot key wait in line in the proxy instead of on the server's row locks
(OneSQL's ``trx_queue``). ``marks`` reads which keys a statement asks for, ``queues`` runs the lines, ``broker`` shares
them between a node's worker processes, ``heat`` finds hot keys by itself. docs/hot-rows.md tells the whole story.
"""
