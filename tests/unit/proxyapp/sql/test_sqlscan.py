"""The SQL tokenizer, statement splitting, and what scan() finds in each statement."""

from __future__ import annotations

import random
import re

import pytest

from proxyapp.sql.digest import compute_digest
from proxyapp.sql.lex import (
    TokenKind,
    first_word,
    split_statements,
    strip_quoted,
    sys_var_parts,
    tokenize,
    unquote,
    user_var_name,
)
from proxyapp.sql.scan import Kind, Statement, scan

T = TokenKind


def one(sql: str) -> Statement:
    """The single statement of ``sql``."""
    statements = scan(sql)
    assert len(statements) == 1, statements
    return statements[0]


# --------------------------------------------------------------------------------------------- tokenizer


def kinds_and_texts(sql: str) -> list[tuple[TokenKind, str]]:
    tokens = tokenize(sql)
    return list(zip(tokens.kinds, tokens.texts, strict=True))


def test_tokenize_point_select() -> None:
    assert kinds_and_texts("SELECT c FROM sbtest1 WHERE id=4711") == [
        (T.WORD, "SELECT"),
        (T.WORD, "c"),
        (T.WORD, "FROM"),
        (T.WORD, "sbtest1"),
        (T.WORD, "WHERE"),
        (T.WORD, "id"),
        (T.OPERATOR, "="),
        (T.NUMBER, "4711"),
    ]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "'a''b' 'c\\'d' \"e\"\"f\" \"g\\\"h\"",
            [(T.STRING, "'a''b'"), (T.STRING, "'c\\'d'"), (T.STRING, '"e""f"'), (T.STRING, '"g\\"h"')],
        ),
        (
            "_utf8mb4'x' N'y' X'0A' b'10' x'zz'",
            [
                (T.STRING, "_utf8mb4'x'"),
                (T.STRING, "N'y'"),
                (T.NUMBER, "X'0A'"),
                (T.NUMBER, "b'10'"),
                (T.WORD, "x"),
                (T.STRING, "'zz'"),
            ],
        ),
        (
            "1 1.5 .5 1e3 2E-4 0x1f 0b11 12abc",
            [
                (T.NUMBER, "1"),
                (T.NUMBER, "1.5"),
                (T.NUMBER, ".5"),
                (T.NUMBER, "1e3"),
                (T.NUMBER, "2E-4"),
                (T.NUMBER, "0x1f"),
                (T.NUMBER, "0b11"),
                (T.WORD, "12abc"),
            ],
        ),
        (
            "`a``b` @x @`y z` @'w' @@sql_mode @@session.time_zone @@GLOBAL.`x`",
            [
                (T.QUOTED_IDENT, "`a``b`"),
                (T.USER_VAR, "@x"),
                (T.USER_VAR, "@`y z`"),
                (T.USER_VAR, "@'w'"),
                (T.SYS_VAR, "@@sql_mode"),
                (T.SYS_VAR, "@@session.time_zone"),
                (T.SYS_VAR, "@@GLOBAL.`x`"),
            ],
        ),
        ("'u'@'%' root@localhost", [(T.STRING, "'u'"), (T.HOST, "@'%'"), (T.WORD, "root"), (T.HOST, "@localhost")]),
        (
            "a:=b<=>c->>'$.x'!=?;",
            [
                (T.WORD, "a"),
                (T.OPERATOR, ":="),
                (T.WORD, "b"),
                (T.OPERATOR, "<=>"),
                (T.WORD, "c"),
                (T.OPERATOR, "->>"),
                (T.STRING, "'$.x'"),
                (T.OPERATOR, "!="),
                (T.PLACEHOLDER, "?"),
                (T.SEMICOLON, ";"),
            ],
        ),
        (
            "a -- c\nb # c\nc /* c */ d --not-a-comment",
            [
                (T.WORD, "a"),
                (T.WORD, "b"),
                (T.WORD, "c"),
                (T.WORD, "d"),
                (T.OPERATOR, "-"),
                (T.OPERATOR, "-"),
                (T.WORD, "not"),
                (T.OPERATOR, "-"),
                (T.WORD, "a"),
                (T.OPERATOR, "-"),
                (T.WORD, "comment"),
            ],
        ),
        (
            "/*!40101 SET x=1 */ /*M!100100 y */ /*!z*/",
            [(T.WORD, "SET"), (T.WORD, "x"), (T.OPERATOR, "="), (T.NUMBER, "1"), (T.WORD, "y"), (T.WORD, "z")],
        ),
        ("SELECT 6*/2", [(T.WORD, "SELECT"), (T.NUMBER, "6"), (T.OPERATOR, "*"), (T.OPERATOR, "/"), (T.NUMBER, "2")]),
        ("SELECT 'open", [(T.WORD, "SELECT"), (T.STRING, "'open")]),
    ],
)
def test_tokenize_kinds(sql: str, expected: list[tuple[TokenKind, str]]) -> None:
    assert kinds_and_texts(sql) == expected


def test_token_positions_and_source() -> None:
    sql = "SET a = CONCAT('x',  'y') /* c */ , b=2"
    tokens = tokenize(sql)
    assert [sql[s:e] for s, e in zip(tokens.starts, tokens.ends, strict=True)] == tokens.texts
    assert tokens.source(3, 9) == "CONCAT('x',  'y')"
    assert tokens.source(2, 2) == ""
    assert tokens.word(0) == "SET" and tokens.word(5) == "" and tokens.word(99) == ""


@pytest.mark.parametrize(
    ("sql", "word"),
    [
        ("SELECT 1", "SELECT"),
        ("  \n\tselect 1", "SELECT"),
        ("/* hostgroup=2 */ SELECT 1", "SELECT"),
        ("-- note\n# more\n/* x */insert INTO t VALUES (1)", "INSERT"),
        ("/*!40101 SET NAMES utf8 */", ""),
        ("(SELECT 1)", ""),
        ("", ""),
    ],
)
def test_first_word(sql: str, word: str) -> None:
    assert first_word(sql) == word


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("`a``b`", "a`b"),
        ("'it''s'", "it's"),
        ("'it\\'s'", "it's"),
        ('"say \\"hi\\""', 'say "hi"'),
        ("`back\\slash`", "back\\slash"),
        ("plain", "plain"),
    ],
)
def test_unquote(text: str, value: str) -> None:
    assert unquote(text) == value


def test_variable_names() -> None:
    assert user_var_name("@`My Var`") == "my var"
    assert user_var_name("@X") == "x"
    assert sys_var_parts("@@SESSION.Time_Zone") == ("session", "time_zone")
    assert sys_var_parts("@@global.`sql_mode`") == ("global", "sql_mode")
    assert sys_var_parts("@@autocommit") == (None, "autocommit")
    assert sys_var_parts("@@`a.b`") == (None, "a.b")


def test_strip_quoted() -> None:
    sql = "SELECT 'a@b', \"x;y\", `FOR` /* LOCK */ -- INTO\n#@\n FROM t /*! FOR UPDATE */"
    assert strip_quoted(sql) == "SELECT  ,  ," + " " * 6 + "\n \n FROM t /*! FOR UPDATE */"


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("SELECT 1; SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("SELECT 1;", ["SELECT 1"]),
        (" ; ;; ", []),
        ("", []),
        ("-- nothing here", []),
        ("SELECT 1; -- done", ["SELECT 1"]),
        ("SELECT ';' ; SELECT \";\"", ["SELECT ';'", 'SELECT ";"']),
        ("SELECT 'a\\';b' ; SELECT 'c'';d'", ["SELECT 'a\\';b'", "SELECT 'c'';d'"]),
        ("SELECT `a;b` FROM t; SELECT 2", ["SELECT `a;b` FROM t", "SELECT 2"]),
        ("SELECT 1 /* ; */; SELECT 2 -- ;\n; SELECT 3 # ;\n", ["SELECT 1 /* ; */", "SELECT 2 -- ;", "SELECT 3 # ;"]),
        (
            "/* hostgroup=1 */ SELECT 1;/* hostgroup=2 */ SELECT 2",
            ["/* hostgroup=1 */ SELECT 1", "/* hostgroup=2 */ SELECT 2"],
        ),
        ("/*!40101 SET NAMES utf8 */;SELECT 1", ["/*!40101 SET NAMES utf8 */", "SELECT 1"]),
        (
            "SELECT CASE WHEN 1 THEN 2 END; SELECT IF(1, 2, 3); SELECT 4",
            ["SELECT CASE WHEN 1 THEN 2 END", "SELECT IF(1, 2, 3)", "SELECT 4"],
        ),
        ("SELECT begin, end FROM t; SELECT 1", ["SELECT begin, end FROM t", "SELECT 1"]),
        ("DROP PROCEDURE IF EXISTS p; SELECT 1", ["DROP PROCEDURE IF EXISTS p", "SELECT 1"]),
        ("CREATE TABLE event (begin INT); SELECT 1", ["CREATE TABLE event (begin INT)", "SELECT 1"]),
    ],
)
def test_split_statements(sql: str, statements: list[str]) -> None:
    assert split_statements(sql) == statements


@pytest.mark.parametrize(
    "body",
    [
        "CREATE PROCEDURE p() BEGIN SELECT 1; IF x THEN SELECT 2; ELSE SELECT 3; END IF; END",
        "CREATE DEFINER=`root`@`localhost` PROCEDURE p(IN a INT) BEGIN DECLARE x INT DEFAULT 0; "
        "WHILE x < a DO SET x = x + 1; END WHILE; REPEAT SET x = x - 1; UNTIL x = 0 END REPEAT; "
        "lbl: LOOP LEAVE lbl; END LOOP lbl; CASE x WHEN 1 THEN SELECT 1; ELSE SELECT 2; END CASE; END",
        "CREATE TRIGGER trg BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = IF(NEW.b, 1, 2); "
        "IF (NEW.c > 1) THEN SET NEW.c = 1; END IF; END",
        "CREATE FUNCTION f() RETURNS INT DETERMINISTIC BEGIN DROP TABLE IF EXISTS x; RETURN 1; END",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM t; INSERT INTO u SELECT 1; END",
        "BEGIN NOT ATOMIC DECLARE x INT; FOR i IN 1..3 DO SET x = i; END FOR; SELECT x; END",
        "IF @a > 0 THEN SELECT 1; ELSE SELECT 2; END IF",
    ],
)
def test_compound_bodies_are_not_split(body: str) -> None:
    assert split_statements(f"{body}; SELECT 'after'") == [body, "SELECT 'after'"]


def test_trigger_without_body_splits_normally() -> None:
    sql = "CREATE TRIGGER t1 BEFORE INSERT ON t FOR EACH ROW SET NEW.a = IF(NEW.b, 1, 2); SELECT 1"
    assert split_statements(sql) == [sql.split("; ")[0], "SELECT 1"]


# ------------------------------------------------------------------------------------------ kind/keyword


@pytest.mark.parametrize(
    ("sql", "kind", "keyword"),
    [
        ("SELECT 1", Kind.SELECT, "SELECT"),
        ("  select c from t", Kind.SELECT, "SELECT"),
        ("/* hostgroup=2 */ SELECT c FROM t", Kind.SELECT, "SELECT"),
        ("-- x\n# y\nSELECT 1", Kind.SELECT, "SELECT"),
        ("(SELECT 1) UNION (SELECT 2)", Kind.SELECT, "SELECT"),
        ("WITH c AS (SELECT 1) SELECT * FROM c", Kind.SELECT, "WITH"),
        ("WITH RECURSIVE c (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT * FROM c", Kind.SELECT, "WITH"),
        ("WITH c AS (SELECT id FROM t) UPDATE t SET a = 1 WHERE id IN (SELECT id FROM c)", Kind.WRITE, "WITH"),
        ("TABLE t", Kind.SELECT, "TABLE"),
        ("INSERT INTO t VALUES (1)", Kind.WRITE, "INSERT"),
        ("update t set a=1", Kind.WRITE, "UPDATE"),
        ("DELETE FROM t", Kind.WRITE, "DELETE"),
        ("REPLACE INTO t VALUES (1)", Kind.WRITE, "REPLACE"),
        ("LOAD DATA INFILE '/tmp/x' INTO TABLE t", Kind.WRITE, "LOAD"),
        ("CREATE TABLE t (a INT)", Kind.WRITE, "CREATE"),
        ("ALTER TABLE t ADD b INT", Kind.WRITE, "ALTER"),
        ("DROP TABLE t", Kind.WRITE, "DROP"),
        ("TRUNCATE TABLE t", Kind.WRITE, "TRUNCATE"),
        ("GRANT SELECT ON db.* TO 'u'@'%'", Kind.WRITE, "GRANT"),
        ("BEGIN", Kind.BEGIN, "BEGIN"),
        ("begin work", Kind.BEGIN, "BEGIN"),
        ("START TRANSACTION", Kind.BEGIN, "START"),
        ("START TRANSACTION READ ONLY", Kind.BEGIN, "START"),
        ("START TRANSACTION READ WRITE", Kind.BEGIN, "START"),
        ("START TRANSACTION WITH CONSISTENT SNAPSHOT", Kind.BEGIN, "START"),
        ("XA START 'trx1'", Kind.BEGIN, "XA"),
        ("XA BEGIN 'trx1'", Kind.BEGIN, "XA"),
        ("COMMIT", Kind.COMMIT, "COMMIT"),
        ("COMMIT WORK", Kind.COMMIT, "COMMIT"),
        ("COMMIT AND NO CHAIN", Kind.COMMIT, "COMMIT"),
        ("COMMIT AND CHAIN", Kind.BEGIN, "COMMIT"),
        ("XA COMMIT 'trx1'", Kind.COMMIT, "XA"),
        ("ROLLBACK", Kind.ROLLBACK, "ROLLBACK"),
        ("ROLLBACK WORK", Kind.ROLLBACK, "ROLLBACK"),
        ("XA ROLLBACK 'trx1'", Kind.ROLLBACK, "XA"),
        ("ROLLBACK TO SAVEPOINT sp1", Kind.OTHER, "ROLLBACK"),
        ("ROLLBACK WORK TO sp1", Kind.OTHER, "ROLLBACK"),
        ("ROLLBACK AND CHAIN", Kind.BEGIN, "ROLLBACK"),
        ("XA END 'trx1'", Kind.OTHER, "XA"),
        ("SAVEPOINT sp1", Kind.SAVEPOINT, "SAVEPOINT"),
        ("RELEASE SAVEPOINT sp1", Kind.OTHER, "RELEASE"),
        ("SET autocommit=0", Kind.SET, "SET"),
        ("USE db", Kind.USE, "USE"),
        ("SHOW TABLES", Kind.SHOW, "SHOW"),
        ("EXPLAIN SELECT 1", Kind.SHOW, "EXPLAIN"),
        ("DESC t", Kind.SHOW, "DESC"),
        ("CALL p(1)", Kind.CALL, "CALL"),
        ("PREPARE s FROM 'SELECT 1'", Kind.PREPARE, "PREPARE"),
        ("EXECUTE s", Kind.EXECUTE, "EXECUTE"),
        ("DEALLOCATE PREPARE s", Kind.DEALLOCATE, "DEALLOCATE"),
        ("DROP PREPARE s", Kind.DEALLOCATE, "DROP"),
        ("LOCK TABLES t READ", Kind.LOCK, "LOCK"),
        ("UNLOCK TABLES", Kind.UNLOCK, "UNLOCK"),
        ("FLUSH TABLES WITH READ LOCK", Kind.LOCK, "FLUSH"),
        ("DO SLEEP(1)", Kind.DO, "DO"),
        ("KILL 42", Kind.OTHER, "KILL"),
        ("FLUSH PRIVILEGES", Kind.OTHER, "FLUSH"),
        ("HANDLER t OPEN", Kind.OTHER, "HANDLER"),
        ("BEGIN NOT ATOMIC SELECT 1; END", Kind.OTHER, "BEGIN"),
    ],
)
def test_kind_and_keyword(sql: str, kind: Kind, keyword: str) -> None:
    st = one(sql)
    assert (st.kind, st.keyword) == (kind, keyword)


# ------------------------------------------------------------------------------------------------ reads


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c FROM sbtest1 WHERE id=4711",
        "SELECT * FROM t WHERE a = 'FOR UPDATE' AND b = '@x' AND c = ';'",
        "SELECT * FROM information_schema.tables",
        "SELECT found_rows, lock_id FROM t",
        "SELECT 1 /* FOR UPDATE */",
        "SELECT * FROM t FOR SYSTEM_TIME ALL",
        "SELECT @@version, @@session.sql_mode",
        "SELECT /*!40001 SQL_NO_CACHE */ * FROM t",
        "WITH c AS (SELECT 1) SELECT * FROM c",
        "(SELECT 1) UNION (SELECT 2)",
        "SHOW TABLES",
        "SHOW FULL COLUMNS FROM t",
        "SHOW VARIABLES LIKE 'sql_mode'",
        "EXPLAIN SELECT * FROM t",
        "EXPLAIN FORMAT=JSON SELECT * FROM t",
        "DESCRIBE t",
        "ANALYZE SELECT * FROM t",
        "TABLE t",
        "SELECT 'GET_LOCK(1)', 'LAST_INSERT_ID()'",
    ],
)
def test_reads(sql: str) -> None:
    assert one(sql).is_read


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t WHERE id = 1 FOR UPDATE",
        "SELECT * FROM t WHERE id = 1\nFOR UPDATE",
        "SELECT * FROM t WHERE id = 1 FOR UPDATE NOWAIT",
        "SELECT * FROM t FOR SHARE",
        "SELECT * FROM t LOCK IN SHARE MODE",
        "SELECT * FROM t /*!50000 FOR UPDATE */",
        "SELECT c INTO @x FROM t",
        "SELECT c FROM t INTO OUTFILE '/tmp/x'",
        "SELECT c FROM t INTO DUMPFILE '/tmp/x'",
        "SELECT @a := c FROM t",
        "SELECT @a",
        "SELECT GET_LOCK('x', 1)",
        "SELECT RELEASE_LOCK('x')",
        "SELECT IS_FREE_LOCK('x')",
        "SELECT IS_USED_LOCK('x')",
        "SELECT NEXTVAL(s)",
        "SELECT SETVAL(s, 10)",
        "SELECT LASTVAL(s)",
        "SELECT NEXT VALUE FOR s",
        "SELECT LAST_INSERT_ID()",
        "SELECT @@identity",
        "SELECT @@warning_count",
        "SELECT FOUND_ROWS()",
        "SELECT ROW_COUNT()",
        "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
        "SELECT /*! SQL_CALC_FOUND_ROWS */ * FROM t",
        "SHOW WARNINGS",
        "SHOW COUNT(*) ERRORS",
        "SHOW MASTER STATUS",
        "SHOW FULL PROCESSLIST",
        "EXPLAIN UPDATE t SET a = 1",
        "INSERT INTO t VALUES (1)",
        "CALL p()",
        "SET @a = 1",
        "USE db",
        "BEGIN",
    ],
)
def test_not_reads(sql: str) -> None:
    assert not one(sql).is_read


@pytest.mark.parametrize(
    ("sql", "locking"),
    [
        ("SELECT * FROM t FOR UPDATE", True),
        ("select * from t for share skip locked", True),
        ("SELECT * FROM t LOCK IN SHARE MODE", True),
        ("WITH c AS (SELECT 1) SELECT * FROM c FOR UPDATE", True),
        ("SELECT * FROM (SELECT * FROM t FOR UPDATE) x", True),
        ("SELECT * FROM t FOR SYSTEM_TIME AS OF '2020-01-01'", False),
        ("SELECT * FROM t", False),
        ("INSERT INTO t SELECT * FROM u FOR UPDATE", False),
    ],
)
def test_locking_read(sql: str, locking: bool) -> None:
    assert one(sql).locking_read is locking


@pytest.mark.parametrize(
    ("sql", "commits"),
    [
        ("CREATE TABLE t (a INT)", True),
        ("CREATE INDEX i ON t (a)", True),
        ("CREATE USER u@localhost", True),
        ("ALTER TABLE t ADD b INT", True),
        ("DROP TABLE t", True),
        ("DROP DATABASE d", True),
        ("TRUNCATE t", True),
        ("RENAME TABLE a TO b", True),
        ("GRANT ALL ON *.* TO u", True),
        ("REVOKE ALL ON *.* FROM u", True),
        ("LOCK TABLES t WRITE", True),
        ("FLUSH PRIVILEGES", True),
        ("ANALYZE TABLE t", True),
        ("OPTIMIZE TABLE t", True),
        ("SET PASSWORD = 'x'", True),
        ("BEGIN", True),
        ("START TRANSACTION", True),
        ("CREATE TEMPORARY TABLE t (a INT)", False),
        ("DROP TEMPORARY TABLE t", False),
        ("INSERT INTO t VALUES (1)", False),
        ("SELECT 1", False),
        ("SET autocommit = 1", False),
        ("UNLOCK TABLES", False),
        ("COMMIT", False),
        ("LOAD DATA INFILE 'x' INTO TABLE t", False),
        ("DROP PREPARE s", False),
    ],
)
def test_implicit_commit(sql: str, commits: bool) -> None:
    assert one(sql).implicit_commit is commits


# -------------------------------------------------------------------------------------------------- SET


def test_set_several_assignments() -> None:
    st = one("SET a=1, @b:=2, SESSION sql_mode='X'")
    assert st.kind is Kind.SET
    assert st.session_vars == [("a", "1"), ("sql_mode", "'X'")]
    assert st.user_vars_assigned == ["b"]
    assert not st.uses_user_vars and not st.global_set and not st.unparsable_set


@pytest.mark.parametrize(
    ("sql", "session_vars"),
    [
        ("SET @@session.time_zone = '+00:00'", [("time_zone", "'+00:00'")]),
        ("SET @@SESSION.Time_Zone='SYSTEM'", [("time_zone", "'SYSTEM'")]),
        ("SET @@local.sql_mode = ''", [("sql_mode", "''")]),
        ("SET @@sql_select_limit = 10", [("sql_select_limit", "10")]),
        ("SET LOCAL wait_timeout = 60", [("wait_timeout", "60")]),
        ("SET SESSION `sql_mode` = 'ANSI'", [("sql_mode", "'ANSI'")]),
        ("SET autocommit=0", [("autocommit", "0")]),
        ("set AUTOCOMMIT = ON", [("autocommit", "ON")]),
        ("SET NAMES utf8mb4 COLLATE utf8mb4_bin", [("names", "utf8mb4 COLLATE utf8mb4_bin")]),
        ("SET NAMES 'utf8'", [("names", "'utf8'")]),
        ("SET names utf8mb4, autocommit = 1", [("names", "utf8mb4"), ("autocommit", "1")]),
        ("SET CHARACTER SET utf8", [("character set", "utf8")]),
        ("SET CHARSET latin1", [("character set", "latin1")]),
        (
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            [("session transaction", "ISOLATION LEVEL READ COMMITTED")],
        ),
        ("SET LOCAL TRANSACTION READ ONLY", [("session transaction", "READ ONLY")]),
        ("SET TRANSACTION READ ONLY", [("next transaction", "READ ONLY")]),
        (
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ WRITE",
            [("next transaction", "ISOLATION LEVEL REPEATABLE READ, READ WRITE")],
        ),
        (
            "SET sql_mode = CONCAT('A', 'B'), time_zone = 'UTC'",
            [("sql_mode", "CONCAT('A', 'B')"), ("time_zone", "'UTC'")],
        ),
        ("SET x = 1 /* why */ + 2", [("x", "1 /* why */ + 2")]),
        ("SET GLOBAL a=1, SESSION b=2, c=3", [("b", "2"), ("c", "3")]),
        ("SET @@global.a = 1, b = 2", [("b", "2")]),
        ("SET sql_mode = DEFAULT", [("sql_mode", "DEFAULT")]),
        ("/*!40101 SET NAMES utf8mb4 */", [("names", "utf8mb4")]),
    ],
)
def test_set_session_vars(sql: str, session_vars: list[tuple[str, str]]) -> None:
    st = one(sql)
    assert st.kind is Kind.SET
    assert st.session_vars == session_vars
    assert not st.unparsable_set


@pytest.mark.parametrize(
    ("sql", "session_vars"),
    [
        ("SET GLOBAL max_connections = 100", []),
        ("SET @@global.max_connections = 100", []),
        ("SET GLOBAL a = 1, b = 2", []),  # the scope keyword carries to later assignments
        ("SET PERSIST max_connections = 100", []),
        ("SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE", []),
        ("SET GLOBAL a = 1, SESSION b = 2", [("b", "2")]),
    ],
)
def test_set_global(sql: str, session_vars: list[tuple[str, str]]) -> None:
    st = one(sql)
    assert st.global_set
    assert st.session_vars == session_vars
    assert not st.is_read


@pytest.mark.parametrize(
    ("sql", "assigned", "uses"),
    [
        ("SET @a = 1", ["a"], False),
        ("SET @a := 1, @B = 2", ["a", "b"], False),
        ("SET @`my var` = 1, @'q' = 2", ["my var", "q"], False),
        ("SET @a = @b + 1", ["a"], True),
        ("SET @a = @a + 1", ["a"], True),
        ("SELECT @a := 1", ["a"], False),
        ("SELECT @n := @n + 1 FROM t", ["n"], True),
        ("SELECT c INTO @x FROM t", ["x"], False),
        ("SELECT a, b INTO @X, @y FROM t", ["x", "y"], False),
        ("SELECT a FROM t INTO @z", ["z"], False),
        ("DO @a := 5", ["a"], False),
        ("SELECT @a, @b", [], True),
        ("EXECUTE s USING @a, @b", [], True),
        ("PREPARE s FROM @sql", [], True),
        ("GRANT ALL ON db.* TO 'u'@'%'", [], False),
        ("CREATE USER u@localhost", [], False),
        ("SELECT @@session.sql_mode", [], False),
        ("SELECT '@a'", [], False),
        ("/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */", ["old_sql_mode"], False),
        ("/*M!100100 SET @x = 1 */", ["x"], False),
    ],
)
def test_user_variables(sql: str, assigned: list[str], uses: bool) -> None:
    st = one(sql)
    assert st.user_vars_assigned == assigned
    assert st.uses_user_vars is uses


def test_mysqldump_header_tracks_sql_mode() -> None:
    st = one("/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */")
    assert st.session_vars == [("sql_mode", "'NO_AUTO_VALUE_ON_ZERO'")]
    assert not st.unparsable_set


@pytest.mark.parametrize(
    "sql",
    [
        "SET SQL_MODE=@OLD_SQL_MODE",
        "SET sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')",
        "SET sql_mode = (SELECT 'ANSI')",
        "SET foo",
        "SET a =",
        "SET",
        "SET NAMES",
        "SET ROLE r1",
        "BEGIN NOT ATOMIC SET @a = 1; END",
        "IF 1 THEN SET @a = 1; END IF",
    ],
)
def test_unparsable_set(sql: str) -> None:
    assert one(sql).unparsable_set


def test_set_with_session_dependent_value_keeps_pairs() -> None:
    st = one("SET sql_mode = CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), time_zone = '+01:00'")
    assert st.session_vars == [("sql_mode", "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')"), ("time_zone", "'+01:00'")]
    assert st.unparsable_set


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("SET sql_log_bin = 0", False),
        ("SET SESSION sql_log_bin=1", True),
        ("SET @@sql_log_bin = OFF", False),
        ("SET sql_log_bin = 'ON'", True),
        ("SET sql_log_bin = @x", None),
        ("SET autocommit = 0", None),
    ],
)
def test_sql_log_bin(sql: str, value: bool | None) -> None:
    assert one(sql).sql_log_bin is value


def test_sql_log_bin_is_also_a_session_var() -> None:
    assert one("SET sql_log_bin = 0").session_vars == [("sql_log_bin", "0")]


@pytest.mark.parametrize(
    ("sql", "kind", "read"),
    [
        ("SET STATEMENT max_statement_time=1 FOR SELECT * FROM t", Kind.SELECT, True),
        ("SET STATEMENT a=1, b=2 FOR UPDATE t SET c = 1", Kind.WRITE, False),
        ("SET STATEMENT a=(SELECT 1 FOR UPDATE) FOR SELECT 1", Kind.SELECT, True),
    ],
)
def test_set_statement_for(sql: str, kind: Kind, read: bool) -> None:
    st = one(sql)
    assert (st.kind, st.is_read, st.session_vars) == (kind, read, [])


@pytest.mark.parametrize("sql", ["SET PASSWORD = 'x'", "SET PASSWORD FOR u = 'x'", "SET DEFAULT ROLE ALL TO u"])
def test_account_sets_are_writes(sql: str) -> None:
    st = one(sql)
    assert (st.kind, st.implicit_commit, st.session_vars) == (Kind.WRITE, True, [])


# ----------------------------------------------------------------------------------- other state changes


@pytest.mark.parametrize(
    ("sql", "schema"),
    [
        ("USE db", "db"),
        ("use `my db`", "my db"),
        ("USE `a``b`", "a`b"),
        ("/* c */ USE Shop;", "Shop"),
        ("USE", None),
    ],
)
def test_use(sql: str, schema: str | None) -> None:
    st = one(sql)
    assert (st.kind, st.schema) == (Kind.USE, schema)


@pytest.mark.parametrize(
    ("sql", "created", "dropped"),
    [
        ("CREATE TEMPORARY TABLE t1 (a INT)", ["t1"], []),
        ("CREATE TEMPORARY TABLE IF NOT EXISTS `db`.`t2` LIKE t", ["db.t2"], []),
        ("create or replace temporary table T3 as select 1", ["T3"], []),
        ("CREATE TABLE t4 (a INT)", [], []),
        ("CREATE TABLE t5 (temporary INT)", [], []),
        ("DROP TEMPORARY TABLE IF EXISTS t1, t2", [], ["t1", "t2"]),
        ("DROP TABLE `a`, db.b", [], ["a", "db.b"]),
        ("DROP TABLES t RESTRICT", [], ["t"]),
        ("DROP VIEW v", [], []),
    ],
)
def test_temporary_tables(sql: str, created: list[str], dropped: list[str]) -> None:
    st = one(sql)
    assert (st.temp_tables_created, st.tables_dropped) == (created, dropped)


@pytest.mark.parametrize(
    ("sql", "get", "release"),
    [
        ("SELECT GET_LOCK('x', 10)", True, False),
        ("select get_lock('x', 0) AS ok", True, False),
        ("DO GET_LOCK('a', 0)", True, False),
        ("SELECT RELEASE_LOCK('x')", False, True),
        ("SELECT RELEASE_ALL_LOCKS()", False, True),
        ("SELECT IS_FREE_LOCK('x')", False, False),
        ("SELECT 'GET_LOCK(1)'", False, False),
        ("SELECT get_lock FROM t", False, False),
    ],
)
def test_named_locks(sql: str, get: bool, release: bool) -> None:
    st = one(sql)
    assert (st.get_lock, st.release_lock) == (get, release)


@pytest.mark.parametrize(
    ("sql", "lock", "unlock"),
    [
        ("LOCK TABLES t READ, u WRITE", True, False),
        ("lock table t write", True, False),
        ("FLUSH TABLES WITH READ LOCK", True, False),
        ("FLUSH TABLES t1, t2 WITH READ LOCK", True, False),
        ("FLUSH TABLES t FOR EXPORT", True, False),
        ("UNLOCK TABLES", False, True),
        ("FLUSH TABLES", False, False),
        ("SELECT * FROM t LOCK IN SHARE MODE", False, False),
    ],
)
def test_table_locks(sql: str, lock: bool, unlock: bool) -> None:
    st = one(sql)
    assert (st.lock_tables, st.unlock_tables) == (lock, unlock)


@pytest.mark.parametrize(
    ("sql", "found"),
    [
        ("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 10", True),
        ("SELECT FOUND_ROWS()", True),
        ("select found_rows( )", True),
        ("SELECT found_rows FROM t", False),
        ("SELECT * FROM t LIMIT 10", False),
    ],
)
def test_found_rows(sql: str, found: bool) -> None:
    assert one(sql).found_rows is found


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT LAST_INSERT_ID()",
        "select last_insert_id()",
        "SELECT  Last_Insert_Id( )  AS id",
        "SELECT LAST_INSERT_ID() id",
        "SELECT LAST_INSERT_ID() AS `id`",
        "SELECT @@IDENTITY",
        "SELECT @@identity AS 'id'",
        "SELECT @@last_insert_id",
        "SELECT @@session.identity",
        "/* c */ SELECT LAST_INSERT_ID();",
        "SELECT\n\tLAST_INSERT_ID()\n",
    ],
)
def test_last_insert_id_only(sql: str) -> None:
    st = one(sql)
    assert st.last_insert_id_only
    assert st.kind is Kind.SELECT and not st.is_read


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT LAST_INSERT_ID(5)",
        "SELECT LAST_INSERT_ID(), 1",
        "SELECT LAST_INSERT_ID() + 1",
        "SELECT LAST_INSERT_ID() FROM t",
        "SELECT LAST_INSERT_ID() AS",
        "SELECT @@last_insert_id AS a b",
        "SELECT @@global.identity",
        "SELECT @@warning_count",
        "(SELECT LAST_INSERT_ID())",
        "INSERT INTO t VALUES (LAST_INSERT_ID())",
        "SELECT 1",
    ],
)
def test_not_last_insert_id_only(sql: str) -> None:
    assert not one(sql).last_insert_id_only


def test_last_insert_id_in_a_multi_statement() -> None:
    first, second = scan("INSERT INTO t VALUES (1); SELECT LAST_INSERT_ID()")
    assert (first.last_insert_id_only, second.last_insert_id_only) == (False, True)


@pytest.mark.parametrize(
    ("sql", "prepared", "deallocated"),
    [
        ("PREPARE stmt1 FROM 'SELECT 1'", "stmt1", None),
        ("PREPARE `S2` FROM @sql", "s2", None),
        ("DEALLOCATE PREPARE stmt1", None, "stmt1"),
        ("DROP PREPARE Stmt1", None, "stmt1"),
        ("EXECUTE stmt1", None, None),
    ],
)
def test_text_prepared_statements(sql: str, prepared: str | None, deallocated: str | None) -> None:
    st = one(sql)
    assert (st.prepare_name, st.deallocate_name) == (prepared, deallocated)


@pytest.mark.parametrize(
    ("sql", "local"),
    [
        ("LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", True),
        ("load data low_priority local infile 'x' into table t", True),
        ("LOAD XML LOCAL INFILE 'x' INTO TABLE t", True),
        ("LOAD DATA INFILE '/tmp/x' INTO TABLE t", False),
        ("LOAD DATA INFILE 'local' INTO TABLE t", False),
    ],
)
def test_load_local(sql: str, local: bool) -> None:
    st = one(sql)
    assert (st.kind, st.load_local) == (Kind.WRITE, local)


# --------------------------------------------------------------------------------- executable comments


def test_executable_comment_view_definition() -> None:
    sql = (
        "/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50013 DEFINER=`root`@`localhost` SQL SECURITY DEFINER */ "
        "/*!50001 VIEW `v` AS select 1 AS `1` */"
    )
    st = one(sql)
    assert (st.kind, st.keyword, st.implicit_commit, st.uses_user_vars) == (Kind.WRITE, "CREATE", True, False)


def test_plain_comment_before_keyword_is_skipped_in_slow_path() -> None:
    st = one("/* hostgroup=2 */ SELECT @@version FOR_X")
    assert (st.kind, st.is_read) == (Kind.SELECT, True)


# ------------------------------------------------------------------------------------ stored programs


def test_procedure_body_is_not_session_state() -> None:
    st = one(
        "CREATE PROCEDURE p() BEGIN SET @x = 1; SET sql_mode = ''; CREATE TEMPORARY TABLE t (a INT); "
        "SELECT GET_LOCK('l', 1); END"
    )
    assert (st.kind, st.implicit_commit) == (Kind.WRITE, True)
    assert (st.session_vars, st.user_vars_assigned, st.temp_tables_created, st.get_lock) == ([], [], [], False)


def test_compound_statement_is_conservative() -> None:
    st = one("lbl: BEGIN NOT ATOMIC SELECT 1; END lbl")
    assert (st.kind, st.is_read, st.unparsable_set) == (Kind.OTHER, False, True)


# ------------------------------------------------------------------------------------ multi statements


def test_multi_statement_scan() -> None:
    statements = scan("SET autocommit=0; BEGIN; UPDATE t SET a = 'x;y' WHERE id = 1; SELECT @a; COMMIT")
    assert [s.kind for s in statements] == [Kind.SET, Kind.BEGIN, Kind.WRITE, Kind.SELECT, Kind.COMMIT]
    assert statements[0].session_vars == [("autocommit", "0")]
    assert statements[3].uses_user_vars and not statements[3].is_read


@pytest.mark.parametrize("sql", ["", "   ", ";", " ; ; ", "/* nothing */", "-- nothing"])
def test_empty_queries_have_no_statements(sql: str) -> None:
    assert scan(sql) == []


def test_trailing_semicolon_is_one_statement() -> None:
    assert [s.kind for s in scan("SELECT 1;")] == [Kind.SELECT]


# ------------------------------------------------------------------------------------------ fast path


@pytest.mark.parametrize(
    ("fast", "slow"),
    [
        ("SELECT c FROM sbtest1 WHERE id=4711", "SELECT c FROM sbtest1 WHERE id=4711 -- ;"),
        ("/* hostgroup=2 */ SELECT a FROM t", "/* hostgroup=2 */ SELECT a FROM t /* @ */"),
        ("INSERT INTO t (a) VALUES (1)", "INSERT INTO t (a) VALUES (1) -- @"),
        ("UPDATE t SET a = 2 WHERE id = 3", "UPDATE t SET a = 2 WHERE id = 3;"),
        ("DELETE FROM t WHERE id = 3", "DELETE FROM t WHERE id = 3 # @"),
        ("REPLACE INTO t VALUES (1)", "REPLACE INTO t VALUES (1);"),
    ],
)
def test_fast_path_agrees_with_full_scan(fast: str, slow: str) -> None:
    assert scan(fast) == scan(slow)


def test_fast_path_shares_one_statement() -> None:
    first = scan("SELECT c FROM sbtest1 WHERE id=1")[0]
    assert scan("select c from sbtest1 where id=2")[0] is first
    assert first.is_read and first.kind is Kind.SELECT


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO users (name, email) VALUES ('bob', 'bob@example.com')",
        "INSERT INTO notes VALUES ('a; b', \"FOUND_ROWS\", 'LOCK')",
        "UPDATE t SET note = 'call me @ 5; ok' WHERE id = 1",
        "SELECT * FROM t WHERE note = 'locked for good' -- FOR UPDATE",
        "SELECT `for`, `into` FROM t /* LOCK; @x */",
        "SELECT * FROM t WHERE a = 'x' FOR UPDATE",
        "SELECT * FROM t WHERE a = 'it''s' INTO @x",
        "SELECT @a, 'b@c' FROM t",
        "SELECT 1; SELECT ';'",
        "SELECT * FROM information_schema.tables WHERE table_name = 'x'",
        "SELECT LAST_INSERT_ID()",
        "DELETE FROM t WHERE email LIKE '%@example.com' LIMIT 1",
        "REPLACE INTO t SELECT GET_LOCK('x', 1)",
    ],
)
def test_fast_path_agrees_with_tokenizing(sql: str) -> None:
    # An empty executable comment changes nothing for the server but forces scan() to tokenize.
    assert scan(sql) == scan("/*!*/ " + sql)


def test_star_slash_outside_executable_comment() -> None:
    # '*/' only ends an executable comment; elsewhere it is '*' and the '/' may open a comment.
    st = one("SELECT 2 */* it's */ FOR UPDATE")
    assert st.locking_read
    assert kinds_and_texts("SELECT 2 */* c */ 3")[2:] == [(T.OPERATOR, "*"), (T.NUMBER, "3")]


def test_fast_path_sees_through_strings() -> None:
    st = scan("INSERT INTO users (email) VALUES ('bob@example.com')")[0]
    assert st is scan("INSERT INTO t VALUES (1)")[0]
    assert (st.kind, st.uses_user_vars) == (Kind.WRITE, False)
    assert one("SELECT * FROM t WHERE a = 'x' FOR UPDATE").locking_read


_FRAGMENTS = (
    "SELECT ",
    "select ",
    "INSERT INTO t VALUES ",
    "SET ",
    "@a",
    "@@session.x",
    ":=",
    "=",
    ",",
    "(",
    ")",
    ";",
    "'",
    '"',
    "`",
    "\\",
    "--",
    "-- ",
    "#",
    "/*",
    "*/",
    "/*!",
    "/*M!",
    "FOR UPDATE",
    "LOCK",
    "INTO",
    " ",
    "\n",
    "1",
    "-2",
    "0x1F",
    "x'0",
    "NULL",
    "GET_LOCK(",
    "LAST_INSERT_ID()",
    "BEGIN",
    "END",
    "IF",
    "CASE",
    "?",
    "é",
    "*/*",
    "/*m!",
    "@'a\\'",
    "'u'@'h\\'",
    "@`a``b`",
    "N'",
    "_utf8'",
    "lbl:",
    "WITH c AS (",
    "UPDATE t SET a=",
)


def test_random_input_keeps_invariants() -> None:
    rng = random.Random(4711)
    for _ in range(3000):
        sql = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 14)))
        tokens = tokenize(sql)
        assert [sql[s:e] for s, e in zip(tokens.starts, tokens.ends, strict=True)] == tokens.texts
        assert all(a < b for a, b in zip(tokens.starts, tokens.starts[1:], strict=False))
        assert all(piece and piece in sql for piece in split_statements(sql))
        statements = scan(sql)
        assert all(isinstance(s, Statement) and isinstance(s.kind, Kind) for s in statements)
        assert scan("/*!*/ " + sql) == statements
        assert re.fullmatch(r"0x[0-9A-F]{16}", compute_digest(sql).hash)
