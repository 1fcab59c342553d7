-- A record field's text as an instant, or NULL when it is no real date-time (2026-02-30T00:00:00Z passes the shape
-- check but fails a cast, which would fail the whole list query): records written before their collection's schema
-- may hold such text. Filters and sorts on a datetime field read it through this.
CREATE FUNCTION trellis_datetime_or_null(value text) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
  RETURN value::timestamptz;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;
