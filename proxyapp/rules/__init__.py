"""Query rules: the rule engine (ProxySQL's semantics), the loaded config compiled for sessions, the query cache."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
