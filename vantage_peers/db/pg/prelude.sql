-- PostgreSQL only, applied before the translated schema.sql (version 1): extensions and the full-text
-- machinery that stands in for SQLite's FTS5 (db/pgschema.py turns each `CREATE VIRTUAL TABLE … USING
-- fts5` into `CALL vp_fts_index(…)`, defined here). Functions a translated expression calls (vp_hex,
-- vp_json_valid) are not here: the translator creates them in the step that first needs them.
CREATE EXTENSION IF NOT EXISTS citext;

-- ---------------------------------------------------------------------------------------------
-- Full-text search (SQLite: FTS5 `porter unicode61 remove_diacritics 2`, see search/pg_fts.py).
-- Text is cut into runs of letters and digits (unicode61's tokens: every other character separates),
-- diacritics removed (unaccent), case folded, English words stemmed by the original Porter
-- algorithm (FTS5's `porter`, which leaves a token ending in a digit as it is); numbers are kept.
-- No stopwords: FTS5 has none either. One `<table>_fts` row per searchable row: `doc` holds every
-- indexed column, column i's positions labelled A, B, C, D (so BM25 weights columns apart),
-- `len` the row's token count over all columns (BM25's document length). The table's comment lists
-- the columns in label order. Components (trigram FTS5 on SQLite) are searched by substring.
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE TEXT SEARCH DICTIONARY vp_porter (TEMPLATE = snowball, Language = porter);
CREATE TEXT SEARCH CONFIGURATION vp_search (PARSER = default);
ALTER TEXT SEARCH CONFIGURATION vp_search ADD MAPPING FOR asciiword, word, numword, hword, hword_part,
    asciihword, hword_asciipart, numhword, hword_numpart WITH unaccent, vp_porter;
ALTER TEXT SEARCH CONFIGURATION vp_search ADD MAPPING FOR int, uint, float, sfloat, version WITH simple;

-- unicode61's token characters are letters and digits: everything else becomes a space first, so
-- the default parser never sees an e-mail, URL, path or signed number ("PR-1234" is "pr", "1234").
CREATE FUNCTION vp_fts_words(value text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN regexp_replace(coalesce(value, ''), '[^[:alnum:]]+', ' ', 'g');
CREATE FUNCTION vp_fts_length(value text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN regexp_count(coalesce(value, ''), '[[:alnum:]]+');

-- The labelled tsvector of up to four columns. A tsvector holds at most 1 MB: a row whose text
-- would exceed it (hundreds of KB of distinct words) is indexed from the first VP_FTS_CUT characters
-- of each column instead of failing the write.
CREATE FUNCTION vp_fts_doc(VARIADIC cols text[]) RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    labels "char"[] := '{A,B,C,D}';
    doc tsvector := ''::tsvector;
    total bigint := 0;
BEGIN
    FOR i IN 1 .. coalesce(array_length(cols, 1), 0) LOOP
        total := total + coalesce(octet_length(cols[i]), 0);
    END LOOP;
    IF total <= 262144 THEN
        FOR i IN 1 .. coalesce(array_length(cols, 1), 0) LOOP
            doc := doc || setweight(to_tsvector('vp_search', vp_fts_words(cols[i])), labels[i]);
        END LOOP;
        RETURN doc;
    END IF;
    BEGIN
        FOR i IN 1 .. coalesce(array_length(cols, 1), 0) LOOP
            doc := doc || setweight(to_tsvector('vp_search', vp_fts_words(cols[i])), labels[i]);
        END LOOP;
        RETURN doc;
    EXCEPTION WHEN program_limit_exceeded THEN  -- VP_FTS_CUT = 65536 characters per column
        doc := ''::tsvector;
        FOR i IN 1 .. coalesce(array_length(cols, 1), 0) LOOP
            doc := doc || setweight(to_tsvector('vp_search', vp_fts_words(left(cols[i], 65536))), labels[i]);
        END LOOP;
        RETURN doc;
    END;
END $$;

-- One `<tbl>_fts` side table with its GIN index and the trigger that keeps it: `cols` are the indexed
-- columns in label order (A, B, C, D; the table's comment lists them for search/pg_fts.py),
-- `watched` the columns whose update re-indexes the row. Names are this file's constants, written
-- unquoted so that they fold to lower case like the rest of the schema.
CREATE PROCEDURE vp_fts_index(tbl text, cols text[], watched text[]) LANGUAGE plpgsql AS $proc$
DECLARE
    doc text := (SELECT string_agg('NEW.' || c, ', ') FROM unnest(cols) AS c);
    len text := (SELECT string_agg('vp_fts_length(NEW.' || c || ')', ' + ') FROM unnest(cols) AS c);
BEGIN
    EXECUTE format('CREATE TABLE %1$s_fts (seq BIGINT NOT NULL REFERENCES %1$s (seq) ON DELETE CASCADE, '
                   'doc tsvector NOT NULL, len INTEGER NOT NULL, PRIMARY KEY (seq) INCLUDE (len))', tbl);
    EXECUTE format('CREATE INDEX %1$s_fts_doc ON %1$s_fts USING gin (doc)', tbl);
    EXECUTE format('COMMENT ON TABLE %s_fts IS %L', tbl, array_to_string(cols, ' '));
    EXECUTE format($f$CREATE FUNCTION %1$s_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO %1$s_fts (seq, doc, len) VALUES (NEW.seq, vp_fts_doc(%2$s), %3$s)
    ON CONFLICT (seq) DO UPDATE SET doc = excluded.doc, len = excluded.len;
    RETURN NULL;
END $body$$f$, tbl, doc, len);
    EXECUTE format('CREATE TRIGGER %1$s_fts_insert AFTER INSERT ON %1$s '
                   'FOR EACH ROW EXECUTE FUNCTION %1$s_fts_sync()', tbl);
    EXECUTE format('CREATE TRIGGER %1$s_fts_update AFTER UPDATE OF %2$s ON %1$s '
                   'FOR EACH ROW EXECUTE FUNCTION %1$s_fts_sync()', tbl, array_to_string(watched, ', '));
END $proc$;

