"""Development tooling, outside the product: MariaDB sandboxes (``sandbox``), the whole stack as child processes
(``stack``), the demo config (``demo``) and ``make run`` (``run_demo``). Plain Python: nothing here imports Django."""
