/**
 * The locks that hold a rule of several rows across writers (docs/administration.md "The rules under
 * concurrency"): a write that may break the rule takes the rule's lock for its scope before it reads what the rule
 * checks, and holds it to the end of its transaction. SQLite's one writer already runs every write transaction
 * alone: there is nothing to take. PostgreSQL's writers run at once: an advisory lock (./postgres/rule-locks.ts).
 */
import { type Op, op } from './op.ts'
import type { Db } from './open.ts'

/**
 * The rules a lock holds: never zero active instance administrators; never a project without an admin (per project);
 * a workflow's callback endpoints within their bound and of distinct URLs (per workflow); a user's live tokens
 * within their bound (per user).
 */
export type Rule = 'instanceAdmins' | 'projectAdmins' | 'workflowCallbacks' | 'liveTokens'

/** Holds `rule` for `scope` (0: the whole instance) until the transaction ends. */
export function lockRule(rule: Rule, scope = 0): Op<void> {
  return op(holdRuleLock, rule, scope)
}

/** SQLite's: nothing to take (the file comment). Per-dialect: PostgreSQL's in ./postgres/per-dialect.ts. */
export function holdRuleLock(_db: Db, _rule: Rule, _scope: number): void {}
