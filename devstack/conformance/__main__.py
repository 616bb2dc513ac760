"""``python -m devstack.conformance``: see ``devstack/conformance/run.py``."""

import sys

from devstack.conformance.run import main

sys.exit(main())
