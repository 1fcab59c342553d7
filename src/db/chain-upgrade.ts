/**
 * Links the log entries written before the hash chain existed (docs/audit.md "Upgrading"): run by each dialect's
 * migrator (./sqlite/migrate.ts, ./postgres/migrate.ts) inside the transaction of the migration that adds the chain
 * columns, right after its statements, so no entry is ever written beside unlinked ones. SQL cannot take a SHA-256 on
 * SQLite, so the links are made here, in id order per scope (the order the lists show), page by page.
 *
 * Written once as a generator of steps, which each migrator drives with its own driver (SQLite synchronously,
 * PostgreSQL awaited): a step is a query (`?` placeholders; PostgreSQL's driver numbers them) answered with its rows
 * as arrays, or the links of a page to store.
 */
import { type ChainLink, type ChainLog, canonicalActivityEntry, canonicalAdminEntry, linkHash } from '../lib/audit-chain.ts'

/** The migration whose statements add the chain columns: its migrator runs `chainExistingEntries` after them. */
export const CHAIN_MIGRATION = /_audit_chain$/

/** What the generator asks its driver: rows of a query, or links to store (`[id, position, hash]`). */
export type ChainUpgradeStep =
  | { kind: 'rows'; sql: string; params: unknown[] }
  | { kind: 'links'; table: 'activity_logs' | 'admin_logs'; links: [number, number, string][] }

/** Entries read and linked per step: a page bounded in memory whatever the log's length. */
const PAGE = 2000

const ACTIVITY_PAGE = `SELECT id, environment_id, created_at, type, action, label, user_id, team_id, collection_id, token_id,
  workflow_name, run_id, step_name, extension FROM activity_logs WHERE id > ? ORDER BY id LIMIT ${PAGE}`
const ACTIVITY_RECORDS = 'SELECT log_id, record_id FROM activity_log_records WHERE log_id >= ? AND log_id <= ?'
const ADMIN_PAGE = `SELECT id, project_id, created_at, type, resource, initiator, user_id, subject_user_id, previous_value,
  new_value, extension FROM admin_logs WHERE id > ? ORDER BY id LIMIT ${PAGE}`

const num = (value: unknown) => Number(value)
const numOrNull = (value: unknown) => (value === null ? null : Number(value))
const str = (value: unknown) => value as string | null
/** A flag as either driver answers it (SQLite 0/1, PostgreSQL true/false). */
const flag = (value: unknown) => value === true || value === 1 || value === 1n || value === '1' || value === 't'

/** Links every entry of both logs in id order per scope; answers how many. */
export function* chainExistingEntries(): Generator<ChainUpgradeStep, number, unknown[][]> {
  let linked = 0
  for (const log of ['activity', 'admin'] as const satisfies ChainLog[]) {
    const heads = new Map<number | null, ChainLink>()
    let after = 0
    for (;;) {
      const page = yield { kind: 'rows', sql: log === 'activity' ? ACTIVITY_PAGE : ADMIN_PAGE, params: [after] }
      if (page.length === 0) break
      const first = num(page[0]![0])
      after = num(page[page.length - 1]![0])
      const recordIds = new Map<number, string[]>()
      if (log === 'activity') {
        for (const [logId, recordId] of yield { kind: 'rows', sql: ACTIVITY_RECORDS, params: [first, after] }) {
          const list = recordIds.get(num(logId)) ?? []
          list.push(recordId as string)
          recordIds.set(num(logId), list)
        }
      }
      const links: [number, number, string][] = []
      for (const row of page) {
        const id = num(row[0])
        const scope = log === 'activity' ? num(row[1]) : numOrNull(row[1])
        const prev = heads.get(scope)
        const position = (prev?.position ?? 0) + 1
        const canonical =
          log === 'activity'
            ? canonicalActivityEntry({
                id, environmentId: scope!, position, createdAt: num(row[2]), type: row[3] as string, action: row[4] as string, label: str(row[5]),
                userId: num(row[6]), teamId: numOrNull(row[7]), collectionId: numOrNull(row[8]), tokenId: numOrNull(row[9]),
                workflowName: str(row[10]), runId: str(row[11]), stepName: str(row[12]), extension: flag(row[13]), recordIds: recordIds.get(id) ?? [],
              })
            : canonicalAdminEntry({
                id, projectId: scope, position, createdAt: num(row[2]), type: row[3] as string, resource: row[4] as string, initiator: row[5] as string,
                userId: numOrNull(row[6]), subjectUserId: numOrNull(row[7]), previousValue: str(row[8]), newValue: str(row[9]), extension: flag(row[10]),
              })
        const hash = linkHash(prev?.hash ?? null, canonical)
        heads.set(scope, { position, hash })
        links.push([id, position, hash])
      }
      yield { kind: 'links', table: log === 'activity' ? 'activity_logs' : 'admin_logs', links }
      linked += links.length
    }
  }
  return linked
}
