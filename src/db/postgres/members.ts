/**
 * Issue 18: the members domain's storage (src/db/members.ts) on PostgreSQL where it differs from SQLite's: the lock of
 * the project's admin rule. Every other members query is written once, in src/db/members.ts.
 */
import { lockProjectAdmins } from '../members.ts'
import { lockRule } from './rule-locks.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const lockProjectAdminsOnPostgres = (db: PgDb, projectId: number) => lockRule(db, 'projectAdmins', projectId)

/** The twins of the members domain's storage, by the SQLite function they stand for. */
export const MEMBERS_TWINS = twins(
  // per-dialect: an advisory lock per project on PostgreSQL; SQLite's single writer needs none.
  twin(lockProjectAdmins, lockProjectAdminsOnPostgres),
)
