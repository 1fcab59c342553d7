/**
 * The watermark protocol for listing rows on PostgreSQL without a per-list lock: a prototype, not wired into the
 * product (docs/scaling-out.md "Next step"), shared by `bench/pg-commit-order.ts --modes watermark` and its invariant
 * test (`test/list-watermark.test.ts`).
 *
 * Writers keep drawing a row's id (or, for a list whose ids are not in order, a `seq`) from a sequence at insert, under
 * no lock, with one rule: the transaction takes its transaction id before it draws (`trellis_sequenced_id`, used as
 * the column's default). Each list has a watermark, `through`: readers list the rows at or below it, and no row can
 * ever appear at or below it later. A pass of the sequencer (one at a time: a transaction-level try-lock) does, per
 * list:
 * 1. In its first statement, before it holds a transaction id, it reads the sequence's newest draw `N` of any session
 *    (`pg_sequence_last_value`; the sequence must have CACHE 1) and which of the list's pending marks are settled. A
 *    mark `(through, xid)` is settled once `xid` is below the oldest transaction id still running
 *    (`pg_snapshot_xmin`): every transaction that drew an id ≤ its `through` took its transaction id before the pass
 *    that set the mark read `N`, so below that pass's own id, and all of them have ended.
 * 2. It dates the rows up to the newest settled mark's `through`, in order (`dateRange`), and moves the watermark
 *    there; the settled marks go.
 * 3. With new draws (`N` past the newest mark), it adds the mark `(N, its own transaction id)`; its id is taken
 *    there, after step 1's read. Marks overlap (each pass may add one while earlier ones wait), so a row is listed at
 *    the first pass after the transactions older than the next pass's mark have ended.
 * A long transaction that holds a transaction id (anywhere in the cluster) holds every list back while it is open.
 */
import type { SQL } from 'bun'

/**
 * The function a watermarked column takes as its default, the sequencer's table (`dating`: the statement that dates a
 * list's rows in `($1, $2]`, or null), and the pass as one function call: one round trip a pass, whatever the lists.
 */
export const WATERMARK_SCHEMA = `
  CREATE FUNCTION trellis_sequenced_id(seq regclass) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
  BEGIN
    PERFORM pg_current_xact_id(); -- the transaction's id before the draw: what a settled mark relies on
    RETURN nextval(seq);
  END $$;

  CREATE TABLE list_sequencer (list text PRIMARY KEY, seq regclass NOT NULL, dating text, through int8 NOT NULL DEFAULT 0,
    marks_through int8[] NOT NULL DEFAULT '{}', marks_xid xid8[] NOT NULL DEFAULT '{}');

  CREATE FUNCTION trellis_list_pass(lock_key int8, max_marks int4)
    RETURNS TABLE (listed text, listed_from int8, listed_to int8, moved int8, pending int4) LANGUAGE plpgsql VOLATILE AS $$
  DECLARE
    names text[]; throughs int8[]; datings text[]; lasts int8[]; settleds int4[];
    marks int8[]; settled int4; upto int8; newest int8; add_mark boolean;
  BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_key) THEN RETURN; END IF;
    -- One statement, before this transaction holds an id: each list's newest draw and how many of its marks are settled.
    SELECT array_agg(l.list ORDER BY l.list), array_agg(l.through ORDER BY l.list), array_agg(l.dating ORDER BY l.list),
        array_agg(coalesce(pg_sequence_last_value(l.seq), 0) ORDER BY l.list),
        array_agg((SELECT count(*) FROM unnest(l.marks_xid) x WHERE x < pg_snapshot_xmin(pg_current_snapshot()))::int4 ORDER BY l.list)
      INTO names, throughs, datings, lasts, settleds FROM list_sequencer l;
    FOR i IN 1 .. coalesce(cardinality(names), 0) LOOP
      SELECT l.marks_through INTO marks FROM list_sequencer l WHERE l.list = names[i];
      settled := settleds[i];
      upto := CASE WHEN settled > 0 THEN marks[settled] ELSE throughs[i] END;
      moved := 0;
      IF settled > 0 AND datings[i] IS NOT NULL THEN
        EXECUTE format('SELECT %s($1, $2)', datings[i]) INTO moved USING throughs[i], upto;
      END IF;
      newest := coalesce(marks[cardinality(marks)], throughs[i]);
      add_mark := lasts[i] > newest AND cardinality(marks) - settled < max_marks;
      IF settled > 0 OR add_mark THEN
        -- The mark's transaction id is taken here at the latest, after the first statement's read.
        UPDATE list_sequencer l SET through = upto,
            marks_through = l.marks_through[settled + 1:] || CASE WHEN add_mark THEN ARRAY[lasts[i]] ELSE '{}'::int8[] END,
            marks_xid = l.marks_xid[settled + 1:] || CASE WHEN add_mark THEN ARRAY[pg_current_xact_id()] ELSE '{}'::xid8[] END
          WHERE l.list = names[i];
      END IF;
      listed := names[i]; listed_from := throughs[i]; listed_to := upto;
      pending := cardinality(marks) - settled + CASE WHEN add_mark THEN 1 ELSE 0 END;
      RETURN NEXT;
    END LOOP;
  END $$;`

/** Marks pending at most per list: past it a pass adds none until one settles. */
const MARKS = 16

/**
 * Registers a list whose rows are numbered by `seq` (which must have CACHE 1: its newest draw is every session's),
 * dated by the function `dating(from, to)` (`datingInOrder`) or not at all (a list with no time, as run events).
 */
export const registerList = (list: string, seq: string, dating?: string) =>
  `INSERT INTO list_sequencer (list, seq, dating) VALUES ('${list}', '${seq}'::regclass, ${dating === undefined ? 'NULL' : `'${dating}'`})`

/** What a pass did to a list: the positions it listed (`from` = `to`: none), their rows whose time moved, the marks left. */
export interface ListPass {
  list: string
  from: number
  to: number
  moved: number
  pending: number
}

/**
 * One pass over every registered list, one function call in its own transaction (nothing when another pass holds
 * `lockKey`): a `ListPass` per list.
 */
export async function watermarkPass(sql: SQL, lockKey: number): Promise<ListPass[]> {
  const rows = (await sql.unsafe('SELECT * FROM trellis_list_pass($1::int8, $2::int4)', [lockKey, MARKS])) as {
    listed: string
    listed_from: string
    listed_to: string
    moved: string
    pending: number
  }[]
  return rows.map((row) => ({ list: row.listed, from: Number(row.listed_from), to: Number(row.listed_to), moved: Number(row.moved), pending: row.pending }))
}

/**
 * The function `name(from, to)` that dates a list ordered by `order` (its id, or its `seq`) within each environment,
 * answering how many rows moved: each row keeps the time its writer proposed unless that is not after the row before
 * it, then it takes 1 µs after that one (`at_i = max(proposed_i, at_{i-1} + 1)`, as a running maximum:
 * `n_i + max(base, max_{j≤i}(proposed_j − n_j))`). Only rows whose time moves are updated. A function of its own,
 * not a statement text the pass runs with EXECUTE: its plan is cached in the session instead of made every pass.
 */
export const datingInOrder = (name: string, table: string, order: string, key: string) => `
  CREATE FUNCTION ${name}(from_position int8, to_position int8) RETURNS int8 LANGUAGE plpgsql VOLATILE AS $$
  DECLARE moved int8;
  BEGIN
    WITH ranged AS (
        SELECT ${key} AS key, environment_id, ${order} AS ord, created_at AS proposed,
          row_number() OVER (PARTITION BY environment_id ORDER BY ${order}) AS n
        FROM ${table} WHERE ${order} > from_position AND ${order} <= to_position),
      bases AS (
        SELECT e.environment_id, coalesce((SELECT t.created_at FROM ${table} t WHERE t.environment_id = e.environment_id AND t.${order} <= from_position ORDER BY t.${order} DESC LIMIT 1), 0) AS base
        FROM (SELECT DISTINCT environment_id FROM ranged) e),
      dated AS (
        SELECT r.key, r.proposed, r.n + greatest(b.base, max(r.proposed - r.n) OVER (PARTITION BY r.environment_id ORDER BY r.ord)) AS at
        FROM ranged r JOIN bases b USING (environment_id))
    UPDATE ${table} t SET created_at = d.at FROM dated d WHERE t.${key} = d.key AND d.at <> d.proposed;
    GET DIAGNOSTICS moved = ROW_COUNT;
    RETURN moved;
  END $$;`
