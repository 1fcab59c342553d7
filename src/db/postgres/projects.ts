/**
 * Issue 18: the projects domain's storage (src/db/projects.ts) on PostgreSQL where it differs from SQLite's: the
 * lookups SQLite caches per connection (src/db/lookup-cache.ts) run their query every time here, so a rename made
 * through another instance is seen at once. Every query is written once, in src/db/projects.ts.
 */
import { findEnvironmentByName, findProjectByName, readEnvironmentByName, readProjectByName } from '../projects.ts'
import { runQueriesOnPostgres } from './dialect.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

/** The twins of the projects domain's storage, by the SQLite function they stand for. */
export const PROJECTS_TWINS = twins(
  // per-dialect: SQLite caches the lookup per connection (its data_version sees only its own file); PostgreSQL asks.
  twin(findProjectByName, (db: PgDb, name: string) => runQueriesOnPostgres(db, readProjectByName(name))),
  // per-dialect: SQLite caches the lookup per connection (its data_version sees only its own file); PostgreSQL asks.
  twin(findEnvironmentByName, (db: PgDb, projectId: number, name: string) => runQueriesOnPostgres(db, readEnvironmentByName(projectId, name))),
)
