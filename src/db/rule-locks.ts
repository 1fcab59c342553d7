/**
 * The locks that hold a rule of several rows across writers (docs/administration.md "The rules under
 * concurrency"): a write that may break the rule takes the rule's lock for its scope before it reads what the rule
 * checks, and holds it to the end of its transaction. SQLite's one writer already runs every write transaction
 * alone: there is nothing to take. PostgreSQL's writers run at once: an advisory lock (`pg_advisory_xact_lock`, the
 * two-int4 form: rule, scope), held to the commit or rollback. So those writes check and act one at a time, each
 * reading (READ COMMITTED: a fresh snapshot per statement) what the one before it committed — as SQLite's single
 * writer runs them. Writes of other scopes never wait.
 */
import { type Op, plan, runPlan } from './op.ts'
import type { Db } from './dialect.ts'
import { clientOf } from './postgres/client.ts'
import { PG_LISTS } from './postgres/monotonic.ts'

/**
 * The rules a lock holds: never zero active instance administrators; never a project without an admin (per project);
 * a workflow's callback endpoints within their bound and of distinct URLs (per workflow); a user's live tokens
 * within their bound (per user); an instance setting's admin log entry naming the value it replaced (per instance).
 */
export type Rule = 'instanceAdmins' | 'projectAdmins' | 'workflowCallbacks' | 'liveTokens' | 'instanceSettings'

/** Each rule's first key of its advisory lock on PostgreSQL, distinct from the lists' (./postgres/monotonic.ts PG_LISTS: 2–4). */
const RULE_LOCKS: Record<Rule, number> = { instanceAdmins: 6, projectAdmins: 7, workflowCallbacks: 9, liveTokens: 10, instanceSettings: 11 }

const LIST_KEYS = new Set<number>(Object.values(PG_LISTS).map((list) => list.lockKey))
if (Object.values(RULE_LOCKS).some((key) => LIST_KEYS.has(key))) throw new Error('a rule lock shares its key with a list lock')

/** Takes the rule's lock for `scope` (0: the whole instance) until the transaction ends. */
const holdRuleLock = plan({
  sqlite: (_db: Db, _rule: Rule, _scope: number): void => {},
  postgres: async (db, rule, scope) => {
    await clientOf(db).unsafe('SELECT pg_advisory_xact_lock($1::int4, $2::int4)', [RULE_LOCKS[rule], scope | 0])
  },
  why: "PostgreSQL's writers run at once, so a rule of several rows takes an advisory lock; SQLite's one writer needs none",
})

/** Holds `rule` for `scope` (0: the whole instance) until the transaction ends. */
export function lockRule(rule: Rule, scope = 0): Op<void> {
  return runPlan(holdRuleLock, rule, scope)
}
