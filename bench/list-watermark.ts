/**
 * The lists' watermark for the bench and its invariant test: the product's protocol (its migration,
 * drizzle/postgres/0026_run_events_watermark.sql, and its pass, src/db/postgres/list-watermark.ts; run events are its
 * first list) on tables of their own, with the dating a list of times needs (notes, logs, runs: not built into the
 * product yet; docs/scaling-out.md "Next step"). Used by `bench/pg-commit-order.ts --modes watermark` and
 * `test/postgres-list-watermark.test.ts`.
 *
 * Writers draw a row's id (or, for a list whose ids are not in its order, a `seq`) from a sequence at insert, under
 * no lock, after their transaction took its transaction id (`trellis_sequenced_id`, the column's default). Readers read
 * at or below the list's watermark. A pass (one at a time: a transaction-level try-lock) reads, before it holds a
 * transaction id, each list's newest draw `N` (`pg_sequence_last_value`; CACHE 1), then adds the mark `(N, its own
 * transaction id)`; once a mark's id is below the oldest transaction id still running (`pg_snapshot_xmin`), every
 * transaction that drew at or below `N` has ended, and a pass dates the rows up to `N` in order and moves the
 * watermark there. Marks overlap (each pass may add one while earlier ones wait). A long transaction that holds a
 * transaction id (anywhere in the cluster) holds every list back while it is open.
 */
import type { SQL } from 'bun'
import migration from '../drizzle/postgres/0026_run_events_watermark.sql' with { type: 'text' }
import { listPass } from '../src/db/postgres/list-watermark.ts'

/**
 * The function a watermarked column takes as its default, the sequencer's table (`dating`: the function that dates a
 * list's rows in `($1, $2]`, or null) and the pass as one function call, as the product's migration creates them (its
 * statements about run events, the product's list, left out).
 */
export const WATERMARK_SCHEMA = migration
  .split('--> statement-breakpoint')
  .filter((statement) => !/^\s*(ALTER TABLE run_events|INSERT INTO list_sequencer)/m.test(statement.replace(/^--.*$/gm, '')))
  .join(';\n')

/**
 * Registers a list whose rows are numbered by `seq` (which must have CACHE 1: its newest draw is every session's),
 * dated by the function `dating(from, to)` (`datingInOrder`) or not at all (a list with no time, as run events).
 */
export const registerList = (list: string, seq: string, dating?: string) =>
  `INSERT INTO list_sequencer (list, seq, dating) VALUES ('${list}', '${seq}'::regclass, ${dating === undefined ? 'NULL' : `'${dating}'`})`

/** One pass over every registered list: the product's (src/db/postgres/list-watermark.ts), under the lock `lockKey`. */
export const watermarkPass = (sql: SQL, lockKey: number) => listPass(sql, lockKey)

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
