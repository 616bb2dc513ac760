"""``python -m fleet.bench.engine``: the bench tool without Django (see ``fleet.bench.engine.cli``)."""

import sys

from fleet.bench.engine.cli import main

sys.exit(main())
