"""The built-in workloads, written as bench scripts: sysbench's OLTP shapes, Amoeba's ``tb_Shop`` CRUD set, MyCat's
batched insert and mydbtest's hot-row transfer.

Each one creates its table under a name unique to the run (``pfbench_<table>_<6 hex digits>``), fills it in
``prepare`` and leaves the dropping to the runner, so runs never collide and nothing they made stays behind.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from fleet.bench.engine.script import Script, parse_script

#: Rows a table is filled with in one INSERT while preparing.
FILL_BATCH = 500
#: Amoeba's INSERT texts (the shop's name and address, in the note's words).
SHOP_NAME = "这是用来测试的店铺的名称"
SHOP_ADDRESS = (
    "地址，是一串字符，内含国家、省份、城市或乡村、街道、"  # noqa: RUF001  (the note's own punctuation)
    "门牌号码、屋邨、大厦等建筑物名称，或者再加楼层数目、房间编号等。"  # noqa: RUF001
)


@dataclass(frozen=True)
class Builtin:
    """A built-in workload: its name, what it does, the rows its table gets by default, and its script maker."""

    name: str
    summary: str
    default_rows: int
    make: Callable[[str, int, int], str]  # (table, rows, batch) -> script text
    default_batch: int = 1


def _fill(table: str, columns: str, values: str, rows: int) -> str:
    """``prepare`` lines filling ``table`` with ``rows`` rows (``:row`` counts 1, 2, ...)."""
    whole, rest = divmod(rows, FILL_BATCH)
    lines = []
    if whole:
        lines.append(f"  [repeat {whole}] [batch {FILL_BATCH}] insert into {table} ({columns}) values ({values});")
    if rest:
        lines.append(f"  [batch {rest}] insert into {table} ({columns}) values ({values});")
    return "\n".join(lines)


def _sbtest(table: str, rows: int, body: str, name: str, extra_declare: str = "") -> str:
    """A sysbench-shaped table (id, k, c, pad) of ``rows`` rows and a transaction ``body``."""
    return f"""option
  name {name}
declare
  row seq
  id int 1 {rows}
  k int 1 {rows}
  d int 1 {rows}{extra_declare}
prepare
  create table {table} (id int not null auto_increment primary key, k int not null default 0,
    c char(120) not null default '', pad char(60) not null default '', key k_{table} (k));
{_fill(table, "id, k, c, pad", ":row, :k, '${char([0-9]11:11)}-${char([0-9]11:11)}', '${char([0-9]11:11)}'", rows)}
begin
{body}
end
"""


def point_select(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_point_select."""
    return _sbtest(table, rows, f"  select c from {table} where id = :id;", "point-select")


_READS = """  [repeat 10] select c from {t} where id = :id;
  select c from {t} where id between :r and :r + 99;
  select sum(k) from {t} where id between :r and :r + 99;
  select c from {t} where id between :r and :r + 99 order by c;
  select distinct c from {t} where id between :r and :r + 99 order by c;"""


def read_only(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_read_only: ten point selects and four range queries in a transaction."""
    body = f"  begin;\n{_READS.format(t=table)}\n  commit;"
    return _sbtest(table, rows, body, "read-only", f"\n  r int 1 {max(1, rows - 99)}")


def read_write(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_read_write: the reads, an index and a non-index update, a delete and its re-insert."""
    body = (
        f"  begin;\n{_READS.format(t=table)}\n"
        f"  update {table} set k = k + 1 where id = :id;\n"
        f"  update {table} set c = '${{char([0-9]11:11)}}-${{char([0-9]11:11)}}' where id = :k;\n"
        f"  delete from {table} where id = :d;\n"
        f"  insert into {table} (id, k, c, pad) values (:d, :k, '${{char([0-9]11:11)}}', '${{char([0-9]11:11)}}');\n"
        "  commit;"
    )
    return _sbtest(table, rows, body, "read-write", f"\n  r int 1 {max(1, rows - 99)}")


def insert(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_insert: one row a transaction (autocommit), new ids from auto_increment."""
    body = f"  insert into {table} (k, c, pad) values (:k, '${{char([0-9]11:11)}}', '${{char([0-9]11:11)}}');"
    return _sbtest(table, rows, body, "insert")


def update(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_update_index: one row's indexed column a transaction."""
    return _sbtest(table, rows, f"  update {table} set k = k + 1 where id = :id;", "update")


def delete(table: str, rows: int, batch: int) -> str:
    """sysbench's oltp_delete: delete a row and insert it again, in a transaction."""
    body = (
        f"  begin;\n  delete from {table} where id = :d;\n"
        f"  insert into {table} (id, k, c, pad) values (:d, :k, '${{char([0-9]11:11)}}', '${{char([0-9]11:11)}}');\n"
        "  commit;"
    )
    return _sbtest(table, rows, body, "delete")


def _shop(table: str, rows: int, body: str, name: str) -> str:
    """Amoeba's ``tb_Shop`` (filled with ``rows`` shops) and one of its four statements."""
    values = f"${{int(1-400)}}, '{SHOP_NAME}', '{SHOP_ADDRESS}', ${{int(0-9)}}, now()"
    return f"""option
  name {name}
declare
  id int 1 {rows}
prepare
  create table {table} (Shop_ID int not null auto_increment primary key, City_ID int default null,
    ShopName varchar(20) character set utf8mb4 collate utf8mb4_unicode_ci not null,
    Address varchar(100) character set utf8mb4 collate utf8mb4_unicode_ci not null,
    ShopStatus int not null default 1, CreateTime datetime not null) default charset = utf8mb4;
{_fill(table, "City_ID, ShopName, Address, ShopStatus, CreateTime", values, rows)}
begin
{body}
end
"""


def shop_insert(table: str, rows: int, batch: int) -> str:
    """Amoeba's InsertQuery: a new shop (City_ID 1..400, status 0..9)."""
    values = f"${{int(1-400)}}, '{SHOP_NAME}', '{SHOP_ADDRESS}', ${{int(0-9)}}, now()"
    body = f"  insert into {table} (City_ID, ShopName, Address, ShopStatus, CreateTime) values ({values});"
    return _shop(table, rows, body, "shop-insert")


def shop_update(table: str, rows: int, batch: int) -> str:
    """Amoeba's UpdateQuery, on a range of ten shops."""
    body = (
        f"  update {table} set ShopName = '修改后的店铺名称', Address = '修改后的店铺详细地址信息', "
        "ShopStatus = ${int(0-9)} where Shop_ID >= :id and Shop_ID <= :id + 9;"
    )
    return _shop(table, rows, body, "shop-update")


def shop_select(table: str, rows: int, batch: int) -> str:
    """Amoeba's SelectQuery: up to ten shops of a range of a hundred."""
    body = f"  select * from {table} where Shop_ID >= :id and Shop_ID <= :id + 99 limit 10;"
    return _shop(table, rows, body, "shop-select")


def shop_delete(table: str, rows: int, batch: int) -> str:
    """Amoeba's DeleteQuery, on one shop (a shop already deleted deletes nothing, as in Amoeba's run)."""
    return _shop(table, rows, f"  delete from {table} where Shop_ID = :id;", "shop-delete")


def mycat_insert(table: str, rows: int, batch: int) -> str:
    """MyCat testtool's insert test: ``batch`` single-row inserts from its templates, then a commit."""
    return f"""option
  name mycat-insert
prepare
  create table {table} (id bigint not null auto_increment primary key, num_data int not null,
    context varchar(45) not null);
begin
  start;
  [repeat {batch}] insert into {table} (num_data, context) values ('${{int(15-1015)}}', '${{char([a-f,0-9]8:45)}}');
  commit;
end
"""


def transfer(table: str, rows: int, batch: int) -> str:
    """mydbtest's transfer between two of ``rows`` rows (the first note's OneSQL test; a small ``rows`` makes the
    rows hot): one balance down, another up, in a transaction."""
    return f"""option
  name transfer
declare
  row seq
  id1 int 2 {rows}
  id2 int 1 {rows}
prepare
  create table {table} (id int not null primary key, balance bigint not null default 1000);
{_fill(table, "id", ":row", rows)}
begin
  start;
  update {table} set balance = balance - 1 where id = :id1;
  update {table} set balance = balance + 1 where id = :id2;
  commit;
end
"""


def transfer_for_update(table: str, rows: int, batch: int) -> str:
    """The note's third test: lock both rows with SELECT ... FOR UPDATE first, then transfer."""
    script = transfer(table, rows, batch).replace("name transfer", "name transfer-for-update")
    return script.replace("  start;\n", f"  start;\n  select * from {table} where id in (:id1, :id2) for update;\n", 1)


#: The queue the ``*-queued`` transfers name in their hint (the proxy's trx_queue, docs/hot-rows.md).
TRANSFER_QUEUE = "acct"


def _queued(script: str, name: str, verb: str) -> str:
    """``script`` renamed ``name``, its first transaction statement starting with ``verb`` carrying the hot-row hint
    with both of the transaction's rows (``/* trx_queue=acct:ID1|ID2 */``, the note's ``[trx_queue :id2]``)."""
    script = re.sub(r"^  name .*$", f"  name {name}", script, count=1, flags=re.MULTILINE)
    hint = f"/* trx_queue={TRANSFER_QUEUE}:{{:id1}}|{{:id2}} */"
    body = script.index("\nbegin\n")
    return script[:body] + script[body:].replace(f"\n  {verb} ", f"\n  {verb} {hint} ", 1)


def transfer_queued(table: str, rows: int, batch: int) -> str:
    """The transfer whose first UPDATE asks the proxy to queue the transaction on both of its rows."""
    return _queued(transfer(table, rows, batch), "transfer-queued", "update")


def transfer_for_update_queued(table: str, rows: int, batch: int) -> str:
    """The transfer after SELECT ... FOR UPDATE, the SELECT (its first locking statement) carrying the hint."""
    return _queued(transfer_for_update(table, rows, batch), "transfer-for-update-queued", "select")


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin("point-select", "sysbench oltp_point_select: one primary-key SELECT", 10_000, point_select),
        Builtin("read-only", "sysbench oltp_read_only: 10 point, 4 range SELECTs in a transaction", 10_000, read_only),
        Builtin("read-write", "sysbench oltp_read_write: the reads, 2 UPDATEs, DELETE, INSERT", 10_000, read_write),
        Builtin("insert", "sysbench oltp_insert: one INSERT (autocommit)", 10_000, insert),
        Builtin("update", "sysbench oltp_update_index: one UPDATE of an indexed column", 10_000, update),
        Builtin("delete", "sysbench oltp_delete: DELETE a row and INSERT it again", 10_000, delete),
        Builtin("shop-insert", "Amoeba tb_Shop: INSERT a shop", 10_000, shop_insert),
        Builtin("shop-update", "Amoeba tb_Shop: UPDATE a range of 10 shops", 10_000, shop_update),
        Builtin("shop-select", "Amoeba tb_Shop: SELECT 10 shops of a range", 10_000, shop_select),
        Builtin("shop-delete", "Amoeba tb_Shop: DELETE a shop", 10_000, shop_delete),
        Builtin("mycat-insert", "MyCat testtool: BATCH templated INSERTs, then COMMIT", 0, mycat_insert, 100),
        Builtin("transfer", "mydbtest hot-row transfer: two UPDATEs in a transaction", 1_000, transfer),
        Builtin("transfer-for-update", "the transfer after SELECT ... FOR UPDATE", 1_000, transfer_for_update),
        Builtin("transfer-queued", "the transfer, its first UPDATE hinting trx_queue=acct:ID1|ID2", 1_000,
                transfer_queued),
        Builtin("transfer-for-update-queued", "the transfer after SELECT ... FOR UPDATE hinting trx_queue", 1_000,
                transfer_for_update_queued),
    )
}  # fmt: skip


class UnknownWorkload(ValueError):
    """No built-in workload has that name."""


def builtin_script(name: str, rows: int | None = None, batch: int | None = None, table: str | None = None) -> Script:
    """The built-in workload ``name`` as a parsed script, its table named uniquely (or ``table``)."""
    builtin = BUILTINS.get(name)
    if builtin is None:
        raise UnknownWorkload(f"unknown workload {name!r} (one of {', '.join(BUILTINS)})")
    if rows is not None and rows < 1:
        raise ValueError("rows must be 1 or more")
    if batch is not None and batch < 1:
        raise ValueError("batch must be 1 or more")
    base = {"shop": "shop", "transfer": "account", "mycat": "mycat"}.get(name.split("-")[0], "sbtest")
    table = table or f"pfbench_{base}_{secrets.token_hex(3)}"
    return parse_script(builtin.make(table, rows or builtin.default_rows or 1, batch or builtin.default_batch))
