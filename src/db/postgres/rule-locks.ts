/**
 * The advisory locks that hold a rule of several rows across writers (docs/administration.md "The rules under
 * concurrency"): a write that may break the rule takes the rule's lock (`pg_advisory_xact_lock`, the two-int4
 * form: rule, scope) before it reads what the rule checks, and holds it to its commit or rollback. So those writes
 * check and act one at a time, each reading (READ COMMITTED: a fresh snapshot per statement) what the one before it
 * committed — as SQLite's single writer runs them. Writes of other scopes never wait. The lock is taken by
 * ./per-dialect.ts `holdRuleLockOnPostgres`.
 */
import type { Rule } from '../rule-locks.ts'
import { PG_LISTS } from './monotonic.ts'

/** First keys, distinct from the lists' (./monotonic.ts PG_LISTS: 2–5 and 8). */
export const RULE_LOCKS: Record<Rule, number> = { instanceAdmins: 6, projectAdmins: 7, workflowCallbacks: 9, liveTokens: 10 }

const LIST_KEYS = new Set<number>(Object.values(PG_LISTS).map((list) => list.lockKey))
if (Object.values(RULE_LOCKS).some((key) => LIST_KEYS.has(key))) throw new Error('a rule lock shares its key with a list lock')
