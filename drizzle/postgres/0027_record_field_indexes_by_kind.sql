-- A collection's indexed fields (docs/records.md "Indexed fields"): each index holds its field's values as the field's
-- kind compares them in a records list (src/db/postgres/dialect.ts `recordFieldOfKind`): numbers as numeric, booleans
-- and text (byte order) as text, null when the JSON value is of another kind; in the list's order (nulls first, then
-- by id), so that a page sorted by the field walks it; and with planner statistics on the same expression, since
-- PostgreSQL does not estimate from a partial index's expression (`createRecordFieldIndex` in src/db/dialect.ts).
-- Before, every field index held the text, which served equality on text alone, and had no statistics. This function
-- (re)builds the index of every indexed field of every collection schema: here for the collections stored before, and
-- by `trellis db copy` for a database copied from SQLite.
CREATE FUNCTION trellis_build_record_field_indexes() RETURNS int4 LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  c record;
  f jsonb;
  field text;
  typed text;
  name text;
  built int4 := 0;
BEGIN
  FOR c IN SELECT id, schema FROM collections WHERE schema IS NOT NULL ORDER BY id LOOP
    FOR f IN SELECT value FROM jsonb_array_elements(c.schema::jsonb) LOOP
      CONTINUE WHEN NOT coalesce((f ->> 'indexed')::boolean, false) OR f ->> 'type' IN ('multiselect', 'json');
      field := f ->> 'name';
      -- A field name is an identifier ([A-Za-z_][A-Za-z0-9_]*): written into the SQL as src/db/dialect.ts does.
      CONTINUE WHEN field !~ '^[A-Za-z_][A-Za-z0-9_]*$';
      typed := CASE
        WHEN f ->> 'type' IN ('number', 'integer') THEN format('(CASE WHEN jsonb_typeof(data::jsonb -> %L) = ''number'' THEN (data::jsonb ->> %L)::numeric END)', field, field)
        WHEN f ->> 'type' = 'boolean' THEN format('(CASE WHEN jsonb_typeof(data::jsonb -> %L) = ''boolean'' THEN (data::jsonb ->> %L) END)', field, field)
        ELSE format('((CASE WHEN jsonb_typeof(data::jsonb -> %L) = ''string'' THEN (data::jsonb ->> %L) END) COLLATE "C")', field, field)
      END;
      name := 'records_field_' || c.id || '_' || left(encode(sha256(convert_to(field, 'UTF8')), 'hex'), 16);
      EXECUTE format('DROP INDEX IF EXISTS %I', name);
      EXECUTE format('DROP STATISTICS IF EXISTS %I', name);
      EXECUTE format('CREATE INDEX %I ON records (environment_id, %s NULLS FIRST, id) WHERE collection_id = %s', name, typed, c.id);
      EXECUTE format('CREATE STATISTICS %I ON (%s) FROM records', name, typed);
      built := built + 1;
    END LOOP;
  END LOOP;
  RETURN built;
END $$;
--> statement-breakpoint
SELECT trellis_build_record_field_indexes();
