/**
 * `trellis audit verify` (docs/audit.md "Verifying"): walks every chain of the configured database — a copy of a
 * data directory, or a PostgreSQL URL — from its start (or its retention anchor) to its head, with a progress bar on
 * stderr, and prints each chain's verdict (`--json`: `{ ok, logs: [{ log, project, environment?, entries, head,
 * breaks }] }`). Exit 0 when every chain verifies, 1 on any break.
 */
import type { ChainLog } from '../lib/audit-chain.ts'
import { ROWS } from '../lib/progress.ts'
import { type ChainReport, type VerifyOptions, type VerifyReport, verifyStoredChains } from '../modules/audit/chain-verify.ts'
import { readSnapshot } from '../db/read.ts'
import type { Store } from '../db/store.ts'
import type { Config } from '../config.ts'
import { booleanFlag, configFrom, type Io, type Parsed, requireProjectByName, UsageError, withStore } from './command.ts'
import { progressOf, QUIET_FLAG } from './progress.ts'

/** The flags of `audit verify` alone (`--project` and `--log` it shares with `export`: ./audit.ts). */
export const VERIFY_FLAGS = {
  json: booleanFlag('verify: print the verdict as JSON'),
  quiet: QUIET_FLAG,
}

const LOGS: readonly ChainLog[] = ['activity', 'admin']

/**
 * Runs `trellis audit verify` with the flags parsed. `claimsOf`: what each chain is also checked against (its
 * anchor, its checkpoints in the database and at the witnesses), made once the store is open.
 */
export async function runVerify(parsed: Parsed, io: Io, claimsOf?: (config: Config, store: Store) => VerifyOptions['claimsOf']): Promise<number> {
  const config = configFrom(parsed)
  const log = parsed.values.log
  if (log !== undefined && !LOGS.includes(log as ChainLog)) throw new UsageError('--log must be activity or admin')
  const project = typeof parsed.values.project === 'string' ? parsed.values.project : null
  const progress = progressOf(io, parsed, { name: 'entries', value: ROWS.value })
  const report = await withStore(config, async (store) => {
    if (project !== null) await readSnapshot(store, requireProjectByName(project))
    try {
      return await verifyStoredChains(store, { project, logs: log === undefined ? LOGS : [log as ChainLog], claimsOf: claimsOf?.(config, store), progress })
    } catch (error) {
      progress.abandon()
      throw error
    }
  })
  return printVerdict(parsed, io, report)
}

/** The verdict on stdout (`--json`: the report as JSON); the exit code, 0 when every chain verifies, else 1. */
export function printVerdict(parsed: Parsed, io: Io, report: VerifyReport): number {
  if (parsed.values.json === true) io.out(JSON.stringify({ ok: report.ok, logs: report.logs }))
  else for (const chain of report.logs) io.out(verdictLine(chain))
  if (parsed.values.json !== true) io.out(report.ok ? `ok: ${report.logs.length} chains verified` : `broken: ${report.logs.filter((l) => l.breaks.length > 0).length} of ${report.logs.length} chains`)
  return report.ok ? 0 : 1
}

/** One chain's verdict for people: its name, its entries and head, and each break. */
function verdictLine(chain: ChainReport): string {
  const names = chain.project === null ? 'the instance' : [chain.project, chain.environment].filter(Boolean).join(' / ')
  const head = chain.head === null ? 'empty' : `head ${chain.head.position} ${chain.head.hash.slice(0, 16)}…`
  const breaks = chain.breaks.map((b) => `\n  ${b.kind} at position ${b.position ?? '(none)'}${b.id === undefined ? '' : ` (entry ${b.id})`}`).join('')
  return `${chain.breaks.length === 0 ? 'ok' : 'BROKEN'} ${chain.chain} (${names}): ${chain.entries} entries, ${head}${breaks}`
}
