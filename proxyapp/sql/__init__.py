"""SQL text in, facts out, no IO: the tokenizer, the statement scanner (what a statement does to session state) and
ProxySQL-style digests."""

from proxyapp.native import prefer_compiled

prefer_compiled(__name__, __path__)
