"""db/dialect.py: SQLite's SQL rewritten for PostgreSQL — each rule as text, then the same statements
run on both backends and giving the same answers (issue #25)."""

from __future__ import annotations

import pytest

from vantage_peers.db.dialect import to_postgres


def pg(sql: str) -> str:
    return to_postgres(sql)[0]


def test_bare_placeholders_stay_positional():
    assert to_postgres("SELECT a FROM t WHERE b = ? AND c = ?") == ("SELECT a FROM t WHERE b = %s AND c = %s", False)


def test_numbered_placeholders_are_named():
    assert to_postgres("SELECT ?2, ?1, ?2") == ("SELECT %(p2)s, %(p1)s, %(p2)s", True)


def test_bare_placeholders_among_numbered_ones_are_numbered_as_sqlite_does():
    # SQLite: a bare `?` takes the largest number used so far, plus one.
    sql = "UPDATE t SET a = ?, b = ?, c = coalesce(c, ?2), d = ? WHERE e = ?5 AND f = ?"
    assert to_postgres(sql) == ("UPDATE t SET a = %(p1)s, b = %(p2)s, c = coalesce(c, %(p2)s), d = %(p3)s "
                                "WHERE e = %(p5)s AND f = %(p6)s", True)


def test_question_marks_and_percent_signs_inside_literals_are_data():
    text, numbered = to_postgres("SELECT '?1 ?', a FROM t WHERE b LIKE '%x%' AND c = ?1")
    assert text == "SELECT '?1 ?', a FROM t WHERE b ILIKE '%%x%%' AND c = %(p1)s" and numbered


def test_char_becomes_chr():
    assert pg("SELECT a || char(10) || b FROM t") == "SELECT a || (chr(10)) || b FROM t"
    assert pg("SELECT char(72, 105)") == "SELECT (chr(72) || chr(105))"
    assert pg("SELECT CAST(a AS VARCHAR(10)), varchar_col FROM t") == "SELECT CAST(a AS VARCHAR(10)), varchar_col FROM t"


def test_cast_as_integer_is_64_bit():
    assert pg("SELECT CAST(value AS INTEGER) FROM meta") == "SELECT CAST(value AS BIGINT) FROM meta"
    assert pg("SELECT CAST(max(CAST(a AS integer ), 1) AS TEXT)") == "SELECT CAST(greatest(CAST(a AS BIGINT), 1) AS TEXT)"


def test_function_calls_inside_literals_are_not_rewritten():
    sql = "SELECT max(a, b), 'max(1, 2)', char(10), 'char(10)' FROM t WHERE c = 'min(3, 4)' OR d = 'json_each(x)'"
    assert pg(sql) == ("SELECT greatest(a, b), 'max(1, 2)', (chr(10)), 'char(10)' FROM t "
                       "WHERE c = 'min(3, 4)' OR d = 'json_each(x)'")


def test_existing_rules():
    assert pg("INSERT OR IGNORE INTO t (a) VALUES (?)") == "INSERT INTO t (a) VALUES (%s) ON CONFLICT DO NOTHING"
    assert pg("SELECT 1 FROM t WHERE name = ? COLLATE NOCASE") == "SELECT 1 FROM t WHERE name = %s"
    assert pg("SELECT 1 FROM t INDEXED BY t_by_x WHERE a IS ?") == "SELECT 1 FROM t WHERE a IS NOT DISTINCT FROM %s"
    assert pg("SELECT instr(a, 'x') FROM t") == "SELECT strpos(a, 'x') FROM t"


def test_unbalanced_call_is_refused_not_mangled():
    with pytest.raises(ValueError):
        to_postgres("SELECT max(a, b FROM t")


# The same statements, run: each backend must give the answer SQLite gives.
@pytest.mark.backends
@pytest.mark.parametrize(("sql", "params", "expected"), [
    ("SELECT 'a' || char(10) || 'b'", (), "a\nb"),
    ("SELECT char(72, 105)", (), "Hi"),
    ("SELECT CAST('1796144049000' AS INTEGER)", (), 1796144049000),
    ("SELECT ? || ?2 || ? || ?1", ("x", "y", "z"), "xyzx"),
    ("SELECT CASE WHEN ? = 1 THEN 'yes' ELSE 'no' END", (1,), "yes"),
    ("SELECT round(CAST(0.1 + ? AS NUMERIC), 6)", (0.2,), 0.3),
    ("SELECT json_insert('[\"a\"]', '$[#]', CAST(? AS TEXT))", ("b",), '["a", "b"]'),
    ("SELECT 'max(1, 2)'", (), "max(1, 2)"),
])
def test_rewritten_statements_answer_like_sqlite(db, sql, params, expected):
    got = db.read(lambda c: c.scalar(sql, params))
    if isinstance(expected, str) and expected.startswith("["):
        import json

        got, expected = json.loads(got), json.loads(expected)
    assert got == expected


@pytest.mark.backends
def test_table_columns_keep_the_schema_spelling_on_both(db):
    from vantage_peers.db.introspect import table_columns

    columns = db.read(lambda c: table_columns(c, "githubRepoMapping"))
    assert {"id", "repo", "project", "active", "createdBy", "createdAt"} <= columns
    assert db.read(lambda c: table_columns(c, "no_such_table")) == set()
    assert db.read(lambda c: table_columns(c, "x'); DROP TABLE meta; --")) == set()


@pytest.mark.backends
def test_constraint_errors_catch_a_unique_violation_on_both(db):
    from vantage_peers.db.integrity import constraint_errors

    db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')"))
    with pytest.raises(constraint_errors()):
        db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('k', 'again')"))
    assert db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = 'k'")) == "v"


@pytest.mark.backends
def test_nul_in_text_is_stored_on_sqlite_and_refused_coded_on_postgresql(db):
    from vantage_peers.core.errors import InvalidArgument

    def put(c):
        c.execute("INSERT INTO meta (key, value) VALUES ('nul', ?)", ("a\x00b",))

    if db.backend == "postgres":
        with pytest.raises(InvalidArgument, match="NUL"):
            db.write(put)
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM meta WHERE key = 'nul'")) == 0
    else:
        db.write(put)
        assert db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = 'nul'")) == "a\x00b"
