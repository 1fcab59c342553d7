/**
 * `trellis backup drill`: restores the newest backup — the newest `trellis backup` file of a directory, or the newest
 * state of Litestream's replica — into a temporary directory, checks it as `trellis restore` does, and says how old
 * its newest write is; exit 1 when anything fails or it is older than --max-age. Meant for a timer (docs/backup.md
 * "Drill").
 */
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { durationMs } from '../config.ts'
import { databasePath } from '../db/sqlite/open.ts'
import { findLitestream, restoreReplica } from '../lib/litestream.ts'
import { CommandError, configFrom, type Io, type Parsed, UsageError } from './command.ts'
import { describeSource, litestreamCall, printReport, replicaSource, reportLines, verifiedCopy } from './restore.ts'

/** The newest backup in `from`: the file itself, or the directory's most recently modified file (dot files are partial backups). */
function newestBackupFile(from: string): string {
  let stat
  try {
    stat = statSync(from)
  } catch {
    throw new CommandError(`no backup at ${from}: it does not exist`)
  }
  if (stat.isFile()) return from
  const files = readdirSync(from)
    .filter((name) => !name.startsWith('.'))
    .map((name) => ({ path: join(from, name), stat: statSync(join(from, name)) }))
    .filter((entry) => entry.stat.isFile())
    .sort((a, b) => b.stat.mtimeMs - a.stat.mtimeMs)
  if (files.length === 0) throw new CommandError(`no backup in ${from}: the directory holds no file`)
  return files[0]!.path
}

export async function runDrill(parsed: Parsed, io: Io): Promise<number> {
  const config = configFrom(parsed)
  if (config.databaseUrl !== null) throw new UsageError('backup drill restores SQLite backups; drill PostgreSQL with its own tools (docs/backup.md "PostgreSQL")')
  const maxAgeText = parsed.values['max-age']
  const maxAgeMs = typeof maxAgeText === 'string' ? durationMs(maxAgeText) : null
  if (typeof maxAgeText === 'string' && maxAgeMs === null) throw new UsageError(`--max-age must be a whole number with a unit (s, m, h or d: 90m, 26h), got "${maxAgeText}"`)
  const from = parsed.values.from
  const replica = typeof from === 'string' ? null : await replicaSource(parsed, config)
  if (typeof from !== 'string' && replica === null) {
    throw new UsageError('say which backups to drill: --from DIR (trellis backup files), --litestream-config FILE (or TRELLIS_LITESTREAM_CONFIG) or --replica URL')
  }
  const work = mkdtempSync(join(tmpdir(), 'trellis-drill-'))
  try {
    const file = databasePath(work)
    let source: string
    if (typeof from === 'string') {
      source = newestBackupFile(resolve(from))
      copyFileSync(source, file)
    } else {
      const bin = await litestreamCall(() => findLitestream(config.litestreamBin))
      await litestreamCall(() => restoreReplica(bin, replica!, file))
      source = describeSource(replica!)
    }
    const copy = verifiedCopy(file, source)
    const now = Date.now()
    const ageMs = copy.newestWriteMicros === null ? null : Math.max(0, now - copy.newestWriteMicros / 1000)
    const ageSeconds = ageMs === null ? null : Math.round(ageMs / 1000)
    const problems: string[] = []
    if (copy.integrity !== 'ok') problems.push(`integrity_check failed: ${copy.integrity}`)
    // The age itself against the limit, not its rounding: a write 1.4 s old is older than --max-age 1s.
    if (maxAgeMs !== null && (ageMs === null || ageMs > maxAgeMs)) {
      problems.push(ageMs === null ? `no write to date (--max-age ${maxAgeText})` : `the newest restorable write is ${(ageMs / 1000).toFixed(1)} s old, more than --max-age ${maxAgeText}`)
    }
    const { file: _temporary, ...report } = copy
    return printReport(io, parsed, { ...report, checkedAt: new Date(now).toISOString(), newestWriteAgeSeconds: ageSeconds }, [
      `restored ${source} into a temporary directory`,
      ...reportLines(copy),
      `newest write age: ${ageSeconds === null ? 'none' : `${ageSeconds} s`}`,
    ], problems)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}
