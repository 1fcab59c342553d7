/**
 * What ./op-runner.ts runs each call of an op through, by the SQLite function the op yielded: a query written once
 * (../query.ts `runQuery`) through PostgreSQL's dialect, and each operation PostgreSQL runs its own way through its
 * twin (./per-dialect.ts). A call of anything else is an error, never a silent fallback.
 */
import type { Call } from '../op.ts'
import { runQuery } from '../query.ts'
import { runQueryOnPostgres } from './dialect.ts'
import { PER_DIALECT, type PerDialect } from './per-dialect.ts'

export type PgTwins = ReadonlyMap<Call['fn'], PerDialect['postgres']>

export const TWINS: PgTwins = new Map<Call['fn'], PerDialect['postgres']>([
  [runQuery as Call['fn'], runQueryOnPostgres as PerDialect['postgres']],
  ...PER_DIALECT.map((pair) => [pair.sqlite, pair.postgres] as const),
])
