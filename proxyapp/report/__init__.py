"""What the proxy says about itself: global counters, digest statistics, the events log."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
