"""A shard's physical schema (``mysql_shards.physical_schema``): a shard that keeps its group's tables in another
schema than the logical one the clients name, as MyCat's data node is a logical schema's database on one host.

A statement on the group's tables runs on such a shard with every schema-qualified name in a logical schema renamed
to the physical one (``rewrite``: ``shop.t``, `` `shop`.`t` ``, ``shop.t.col``, ``shop.f()``, by tokens, so that
strings, comments and other schemas are left alone), and with the physical schema as its connection's default
schema when the session's is the logical one (``default_schema``), so that unqualified names resolve there too.
Statements that name no sharded table are never renamed. Pure functions: no IO.
"""

from __future__ import annotations

from proxyapp.sharding.plan import table_names
from proxyapp.sharding.shardmap import Shard, ShardedTable
from proxyapp.sql.lex import TokenKind, Tokens, statement_ranges, tokenize, unquote

_NAMES = (TokenKind.WORD, TokenKind.QUOTED_IDENT)


def default_schema(shard: Shard, schema: str | None) -> str | None:
    """The default schema a statement on ``shard`` runs with for a session in default schema ``schema``: the
    shard's physical schema when it renames ``schema``; None when the session's own applies."""
    if not shard.renamed or schema is None:
        return None
    lowered = schema.lower()
    return next((physical for name, physical in shard.renamed if name == lowered), None)


def shard_on(table: ShardedTable, hostgroup: int) -> Shard:
    """The shard of ``table``'s group that ``hostgroup`` serves (a statement placed there runs on it)."""
    return next(shard for shard in table.shards if shard.hostgroup_id == hostgroup)


def rewrite(sql: str, shard: Shard) -> str:
    """``sql`` as it runs on ``shard``: each schema-qualified name whose schema the shard renames named with the
    physical schema instead (``sql`` itself when there is none)."""
    if not shard.renamed:
        return sql
    renamed = dict(shard.renamed)
    tokens = tokenize(sql)
    spots = _qualifiers(tokens, renamed)
    if not spots:
        return sql
    parts: list[str] = []
    at = 0
    for i in spots:
        parts.append(sql[at : tokens.starts[i]])
        parts.append("`" + renamed[_name(tokens, i)].replace("`", "``") + "`")
        at = tokens.ends[i]
    parts.append(sql[at:])
    return "".join(parts)


def _name(tokens: Tokens, i: int) -> str:
    """The identifier at ``i``, unquoted and lowercase ('' when token ``i`` is none)."""
    return unquote(tokens.texts[i]).lower() if tokens.kinds[i] in _NAMES else ""


def _qualifiers(tokens: Tokens, renamed: dict[str, str]) -> list[int]:
    """The indexes of the tokens that name a renamed schema as a qualifier, in order.

    ``L.x`` is a schema and a table only where a table may stand: elsewhere it is a table's (or alias's) column.
    When no table, alias or column of the statement is spelled like a renamed schema, every ``L.x`` is a schema's;
    otherwise only those where the planner finds table names, three-part names (``L.t.col``, ``L.t.*``) and
    schema-qualified function calls (``L.f(...)``)."""
    candidates: list[int] = []
    bare = False
    for i in range(len(tokens)):
        if _name(tokens, i) not in renamed:
            continue
        qualifies = tokens.text(i + 1) == "." and i + 2 < len(tokens) and tokens.kinds[i + 2] in _NAMES
        if qualifies and tokens.text(i - 1) != ".":
            candidates.append(i)
        else:
            bare = True
    if not bare or not candidates:
        return candidates
    tables = {name.at for lo, hi in statement_ranges(tokens) for name in table_names(tokens, lo, hi, None)}
    return [i for i in candidates if i in tables or tokens.text(i + 3) in (".", "(")]
