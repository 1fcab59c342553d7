/**
 * Issue 18: the users domain's one operation that differs on PostgreSQL (src/db/users.ts): the instance
 * administrators' rule lock, which SQLite's single writer makes unnecessary.
 */
import { lockInstanceAdmins } from '../users.ts'
import { lockRule } from './rule-locks.ts'
import type { PgDb } from './store.ts'
import { twin, twins } from './twin.ts'

const lockInstanceAdminsOnPostgres = (db: PgDb) => lockRule(db, 'instanceAdmins')

/** The twins of the users domain's storage, by the SQLite function they stand for. */
export const USERS_TWINS = twins(
  // per-dialect: PostgreSQL's writers run at once, so the rule takes an advisory lock; SQLite's one writer needs none.
  twin(lockInstanceAdmins, lockInstanceAdminsOnPostgres),
)
