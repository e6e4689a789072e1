"""The SQLite/MySQL compatibility layer, on real SQLite files."""

from __future__ import annotations

import hashlib
import sqlite3
import time

import pytest

from harnessctl.envs.dbbench.sandbox.hxenv_dbbench import sqlcompat


@pytest.fixture
def conn(tmp_path):
    c = sqlcompat.connect(str(tmp_path / "t.sqlite"))
    c.execute('CREATE TABLE "My Table" ("Name" TEXT, "Score" TEXT)')
    c.executemany('INSERT INTO "My Table" VALUES (?, ?)', [("Ann", "3"), ("Bob", None)])
    yield c
    c.close()


def one(conn, sql):
    ok, rows = sqlcompat.execute(conn, sql)
    assert ok, rows
    return rows[0][0]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT CONCAT('a', 'b', 3)", "ab3"),
        ("SELECT CONCAT('a', NULL)", None),
        ("SELECT CONCAT_WS(',', 'a', NULL, 'b')", "a,b"),
        ("SELECT CONCAT_WS(NULL, 'a')", None),
        ("SELECT IF(2 > 1, 'yes', 'no')", "yes"),
        ("SELECT IF(NULL, 'yes', 'no')", "no"),
        ("SELECT IF('0abc', 'yes', 'no')", "no"),
        ("SELECT IF('1abc', 'yes', 'no')", "yes"),
        ("SELECT LEFT('hello', 2)", "he"),
        ("SELECT LEFT('hello', -1)", ""),
        ("SELECT RIGHT('hello', 3)", "llo"),
        ("SELECT RIGHT('hi', 10)", "hi"),
        ("SELECT MD5('abc')", "900150983cd24fb0d6963f7d28e17f72"),
        ("SELECT MD5(NULL)", None),
        ("SELECT 'Hello World' REGEXP '^hello'", 1),
        ("SELECT 'Hello' REGEXP 'x$'", 0),
        ("SELECT NULL REGEXP 'a'", None),
        ("SELECT REGEXP_LIKE('abc', 'B')", 1),
        ("SELECT LOCATE('bar', 'foobarbar')", 4),
        ("SELECT LOCATE('BAR', 'foobarbar', 5)", 7),
        ("SELECT LOCATE('x', 'abc')", 0),
        ("SELECT SUBSTRING_INDEX('www.mysql.com', '.', 2)", "www.mysql"),
        ("SELECT SUBSTRING_INDEX('www.mysql.com', '.', -2)", "mysql.com"),
        ("SELECT LCASE('AbC'), 1", "abc"),
        ("SELECT UCASE('AbC')", "ABC"),
        ("SELECT CHAR_LENGTH('héllo')", 5),
    ],
)
def test_mysql_functions(conn, sql, expected):
    assert one(conn, sql) == expected


def test_regexp_filters_rows_case_insensitively(conn):
    ok, rows = sqlcompat.execute(conn, "SELECT Name FROM `My Table` WHERE Name REGEXP '^a'")
    assert (ok, rows) == (True, [("Ann",)])


def test_errors_are_returned_not_raised(conn):
    assert sqlcompat.execute(conn, "SELECT nope FROM `My Table`") == (
        False,
        "no such column: nope",
    )
    ok, text = sqlcompat.execute(conn, "SELECT 1; SELECT 2")
    assert not ok and "one statement" in text
    ok, text = sqlcompat.execute(conn, "SELEC 1")
    assert not ok and "syntax error" in text
    assert sqlcompat.execute(conn, " ; ") == (False, "empty statement")
    assert sqlcompat.execute(conn, "SELECT 1;") == (True, [(1,)])


def test_autocommit_persists_each_statement(tmp_path, conn):
    assert sqlcompat.execute(conn, "INSERT INTO `My Table` VALUES ('Cy', '9')") == (True, [])
    other = sqlite3.connect(tmp_path / "t.sqlite")
    assert other.execute('SELECT COUNT(*) FROM "My Table"').fetchone() == (3,)
    other.close()


def test_mysql_inspection_commands(conn):
    assert sqlcompat.execute(conn, "SHOW TABLES;") == (True, [("My Table",)])
    ok, rows = sqlcompat.execute(conn, "DESCRIBE `My Table`")
    assert ok and rows == [
        ("Name", "text", "YES", "", None, ""),
        ("Score", "text", "YES", "", None, ""),
    ]
    assert sqlcompat.execute(conn, 'SHOW COLUMNS FROM "My Table"')[1] == rows
    assert sqlcompat.execute(conn, "DESC nothing") == (False, "no such table: nothing")
    assert sqlcompat.execute(conn, "USE `My Table`;") == (True, [])
    ok, rows = sqlcompat.execute(conn, "SHOW CREATE TABLE `My Table`")
    assert ok and rows[0][0] == "My Table" and rows[0][1].startswith("CREATE TABLE")
    assert not sqlcompat.execute(conn, "SHOW CREATE TABLE nothing")[0]


def test_runaway_statement_is_aborted(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlcompat, "STATEMENT_TIME_LIMIT_S", 0.3)
    c = sqlcompat.connect(str(tmp_path / "slow.sqlite"))
    endless = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
    start = time.monotonic()
    ok, text = sqlcompat.execute(c, endless)
    assert not ok and "interrupted" in text
    assert time.monotonic() - start < 3
    # the limit is per statement: the connection still works afterwards
    assert sqlcompat.execute(c, "SELECT 1") == (True, [(1,)])
    c.close()


def test_read_only_connection_refuses_writes(tmp_path, conn):
    ro = sqlcompat.connect(str(tmp_path / "t.sqlite"), read_only=True)
    ok, text = sqlcompat.execute(ro, "DELETE FROM `My Table`")
    assert not ok and "readonly" in text.replace(" ", "").lower()
    assert sqlcompat.execute(ro, "SELECT COUNT(*) FROM `My Table`") == (True, [(2,)])
    ro.close()


def test_observation_truncates_at_limit():
    rows = [("x" * 50,)] * 30
    text = sqlcompat.observation(True, rows)
    assert text == str(rows)[:800] + "[TRUNCATED]"
    assert sqlcompat.observation(True, [("a",)]) == "[('a',)]"
    assert sqlcompat.observation(False, "no such column: x") == "no such column: x"
    assert sqlcompat.observation(False, "e" * 30, limit=10) == "e" * 10 + "[TRUNCATED]"
    assert sqlcompat.observation(True, []) == "[]"


def _mysql_hash(rows):
    # Written out from the checker's SQL, independently of sqlcompat's implementation.
    hashes = sorted(
        hashlib.md5(",".join(v for v in row if v is not None).encode()).hexdigest()[:5]
        for row in rows
    )
    return hashlib.md5(",".join(hashes)[:1024].encode()).hexdigest()


def test_table_hash_skips_nulls_like_concat_ws(conn):
    assert sqlcompat.table_hash(conn, "My Table") == _mysql_hash([("Ann", "3"), ("Bob", None)])
    # a NULL and a missing value hash alike; an empty string does not
    sqlcompat.execute(conn, "UPDATE `My Table` SET Score = '' WHERE Name = 'Bob'")
    assert sqlcompat.table_hash(conn, "My Table") == _mysql_hash([("Ann", "3"), ("Bob", "")])
    assert sqlcompat.table_hash(conn, "My Table", ["Name"]) == _mysql_hash([("Ann",), ("Bob",)])


def test_table_hash_of_empty_and_missing_tables(conn):
    sqlcompat.execute(conn, "DELETE FROM `My Table`")
    assert sqlcompat.table_hash(conn, "My Table") is None  # md5(NULL) in MySQL
    with pytest.raises(sqlite3.OperationalError):
        sqlcompat.table_hash(conn, "absent")


def test_table_hash_stops_at_group_concat_max_len(tmp_path):
    def rowhash(v: str) -> str:
        return hashlib.md5(v.encode()).hexdigest()[:5]

    values = [str(i) for i in range(400)]
    ranked = sorted(values, key=rowhash)
    c = sqlcompat.connect(":memory:")
    c.execute("CREATE TABLE t (v TEXT)")
    c.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
    before = sqlcompat.table_hash(c, "t")
    assert before == _mysql_hash([(v,) for v in values])
    # 1024 chars hold 170 row hashes and 4 chars of the 171st: a row ranked past that is
    # invisible to the checker, before and after a change that keeps it there.
    late = next(f"late-{k}" for k in range(1000) if rowhash(f"late-{k}") > rowhash(ranked[171]))
    c.execute("UPDATE t SET v = ? WHERE v = ?", (late, ranked[-1]))
    assert sqlcompat.table_hash(c, "t") == before
    c.execute("UPDATE t SET v = 'x' WHERE v = ?", (ranked[0],))
    assert sqlcompat.table_hash(c, "t") != before
    c.close()


def test_mysql_string_escapes_and_join_keywords(conn):
    conn.execute("INSERT INTO `My Table` VALUES (?, ?)", ("Don't\\nstop", "1"))
    # MySQL reads 'Don\'t\\nstop' as Don't\nstop with a literal backslash, as stored
    ok, rows = sqlcompat.execute(conn, r"SELECT Score FROM `My Table` WHERE Name = 'Don\'t\\nstop'")
    assert (ok, rows) == (True, [("1",)])
    assert one(conn, r"SELECT 'a\tb'") == "a\tb"
    assert one(conn, "SELECT 'it''s'") == "it's"
    ok, rows = sqlcompat.execute(
        conn,
        "SELECT LEFT(a.Name, 1), RIGHT(b.Name, 2) FROM `My Table` a "
        "LEFT JOIN `My Table` b ON a.Name = b.Name WHERE a.Name = 'Ann' -- LEFT(",
    )
    assert (ok, rows) == (True, [("A", "nn")])
    # quoted names and comments are left alone
    assert sqlcompat.translate("SELECT \"left(\" /* 'x\\' */") == "SELECT \"left(\" /* 'x\\' */"


# --- MySQL 8 rules: identifiers and the default collation utf8mb4_0900_ai_ci ---------------


@pytest.fixture
def mysql(tmp_path):
    """A table whose columns use the collation, as the DBBench table builder makes them."""
    c = sqlcompat.connect(str(tmp_path / "m.sqlite"))
    col = f"TEXT COLLATE {sqlcompat.COLLATION}"
    c.execute(f"CREATE TABLE `1999_Season_Results` (`Name` {col}, `1st_Place` {col})")
    rows = [("Café Noir", "3"), ("José", "5"), ("apple", "1"), ("Banana", "2"), ("Édith", "4")]
    c.executemany("INSERT INTO `1999_Season_Results` VALUES (?, ?)", rows)
    yield c
    c.close()


def rows(conn, sql):
    ok, result = sqlcompat.execute(conn, sql)
    assert ok, result
    return result


def test_unquoted_names_may_begin_with_a_digit(mysql):
    assert rows(mysql, "SELECT COUNT(*) FROM 1999_Season_Results") == [(5,)]
    sql = "SELECT t.1st_Place FROM 1999_Season_Results t WHERE 1st_Place = '5'"
    assert rows(mysql, sql) == [("5",)]
    assert rows(mysql, "DESCRIBE 1999_Season_Results")[1][0] == "1st_Place"
    # numbers stay numbers: exponents, hex, decimals, plain integers
    assert rows(mysql, "SELECT 1e3, 0x10, 1.5e2, 10") == [(1000.0, 16, 150.0, 10)]
    assert sqlcompat.translate("SELECT 2nd FROM t2 WHERE x = 1.5e3") == (
        "SELECT `2nd` FROM t2 WHERE x = 1.5e3"
    )


def test_the_collation_is_accent_and_case_insensitive(mysql):
    assert one(mysql, "SELECT 'Cafe' = 'Café'") == 1
    assert one(mysql, "SELECT 'CAFE' = 'café'") == 1
    assert rows(mysql, "SELECT `1st_Place` FROM 1999_Season_Results WHERE Name = 'cafe noir'") == [
        ("3",)
    ]
    assert rows(mysql, "SELECT Name FROM 1999_Season_Results WHERE Name IN ('JOSE')") == [("José",)]
    # a function result compared with a literal follows the collation too
    assert rows(mysql, "SELECT Name FROM 1999_Season_Results WHERE LOWER(Name) = 'edith'") == [
        ("Édith",)
    ]
    assert rows(mysql, "UPDATE 1999_Season_Results SET 1st_Place = '9' WHERE Name = 'Jose'") == []
    assert rows(mysql, "SELECT 1st_Place FROM 1999_Season_Results WHERE Name = 'josé'") == [("9",)]
    mysql.execute("INSERT INTO `1999_Season_Results` VALUES ('cafe noir', '0')")
    assert one(mysql, "SELECT COUNT(DISTINCT Name) FROM 1999_Season_Results") == 5


def test_the_collation_is_no_pad(mysql):
    # The 0900 collations are NO PAD: trailing spaces count (unlike utf8mb4_general_ci).
    # Checked against MySQL's documentation; SQLite already behaved so.
    assert one(mysql, "SELECT 'a' = 'a '") == 0
    mysql.execute("INSERT INTO `1999_Season_Results` VALUES ('apple ', '7')")
    assert rows(mysql, "SELECT `1st_Place` FROM `1999_Season_Results` WHERE Name = 'apple'") == [
        ("1",)
    ]


def test_order_by_follows_the_collation(mysql):
    ordered = rows(mysql, "SELECT Name FROM 1999_Season_Results ORDER BY Name")
    assert [r[0] for r in ordered] == ["apple", "Banana", "Café Noir", "Édith", "José"]
    assert sqlcompat.collate("a b", "ab") < 0  # spaces and punctuation before letters
    assert sqlcompat.collate("z", "1") > 0 and sqlcompat.collate("Straße", "STRASSE") == 0


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 'Café Noir' LIKE 'cafe%'", 1),  # case- and accent-insensitive
        ("SELECT 'Crème' LIKE 'CR_ME'", 1),  # _ is one character
        ("SELECT 'abc ' LIKE 'abc'", 0),  # trailing spaces count in LIKE
        ("SELECT 'a_b' LIKE 'a\\_b'", 1),  # backslash is the default escape
        ("SELECT 'axb' LIKE 'a\\_b'", 0),
        ("SELECT '10%' LIKE '10!%' ESCAPE '!'", 1),
        ("SELECT NULL LIKE 'a'", None),
        ("SELECT LOWER('ÉCOLE'), 1", "école"),  # every letter, not ASCII only
        ("SELECT LOCATE('E', 'café')", 4),  # LOCATE and INSTR follow the collation
        ("SELECT INSTR('Crème brûlée', 'BRULEE')", 7),
    ],
)
def test_like_and_string_functions_follow_mysql(mysql, sql, expected):
    assert one(mysql, sql) == expected


def test_like_filters_rows_under_the_collation(mysql):
    sql = "SELECT Name FROM 1999_Season_Results WHERE Name LIKE 'e%' OR Name LIKE '%OSE'"
    assert rows(mysql, sql) == [("José",), ("Édith",)]


def test_pragma_and_quoted_names_are_not_rewritten():
    assert sqlcompat.translate("PRAGMA table_info('x')") == "PRAGMA table_info('x')"
    assert sqlcompat.translate("SELECT `1a` FROM \"2b\" -- 3c = 'x'") == (
        "SELECT `1a` FROM \"2b\" -- 3c = 'x'"
    )
    assert sqlcompat.translate("SELECT 'it''s' = a") == (
        f"SELECT 'it''s' COLLATE {sqlcompat.COLLATION} = a"
    )
