/**
 * Twins: each function of the storage face (src/db, SQLite, synchronous) has a PostgreSQL twin here, taking the same
 * arguments after the handle and answering the same value, asynchronously. `twin(face, pg)` pairs them and makes the
 * compiler check that the two agree; ./twins.ts collects every pair, and ./op-runner.ts runs an op's calls through
 * them. A call without a twin is an error, never a silent fallback.
 */
import type { Call } from '../op.ts'
import type { Db } from '../open.ts'
import type { PgDb } from './store.ts'

/** A face function's PostgreSQL twin: the same arguments after the handle, the same answer, asynchronously. */
export type PgTwin = (db: PgDb, ...args: never[]) => Promise<unknown>

/** The twins by the SQLite function they stand for. */
export type PgTwins = ReadonlyMap<Call['fn'], PgTwin>

/** One face function and its twin; the twin's arguments and answer must be the face function's. */
export function twin<A extends unknown[], T>(face: (db: Db, ...args: A) => T, pg: (db: PgDb, ...args: A) => Promise<T>): [Call['fn'], PgTwin] {
  return [face as unknown as Call['fn'], pg as unknown as PgTwin]
}

/** A module's twins as one map (`export const NOTES_TWINS = twins(twin(findNoteById, …), …)`). */
export function twins(...pairs: [Call['fn'], PgTwin][]): PgTwins {
  return new Map(pairs)
}
