"""The config document, the first seam between the control plane and the proxy: ProxySQL's tables, the global variables,
parsing and validating a document into a ``Config``."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
