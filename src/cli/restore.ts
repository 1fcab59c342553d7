/**
 * `trellis restore --to-time T --into DIR`: the SQLite database as it was at T, restored from Litestream's replica
 * (`litestream restore -timestamp`) into a new data directory, then checked (docs/backup.md "Restore to a point in time").
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Config } from '../config.ts'
import { databasePath } from '../db/sqlite/open.ts'
import { type RestoredDatabase, verifyRestoredDatabase } from '../db/sqlite/verify.ts'
import { configuredDatabases, findLitestream, LitestreamError, type RestoreSource, restoreReplica } from '../lib/litestream.ts'
import { SECRET_FILE } from '../lib/secret.ts'
import { booleanFlag, type Command, CommandError, configFrom, type Io, type Parsed, parseFlags, required, stringFlag, UsageError } from './command.ts'

/** The flags that say where Litestream's replica is: shared by `restore` and `backup drill`. */
export const REPLICA_FLAGS = {
  'litestream-config': stringFlag('FILE', 'the Litestream configuration that replicates the database (env TRELLIS_LITESTREAM_CONFIG)'),
  replica: stringFlag('URL', 'the replica itself instead: file:///path or s3://bucket/path (credentials from the environment, as Litestream takes them)'),
}

/**
 * Where to restore from: `--replica URL`, else the Litestream configuration (`--litestream-config` or
 * TRELLIS_LITESTREAM_CONFIG) and the database it replicates (its one database, or --data's file among several);
 * null when neither is given.
 */
export async function replicaSource(parsed: Parsed, config: Config): Promise<RestoreSource | null> {
  const replica = parsed.values.replica
  const configFile = typeof parsed.values['litestream-config'] === 'string' ? resolve(parsed.values['litestream-config']) : config.litestreamConfig
  if (typeof replica === 'string') {
    if (configFile !== null && typeof parsed.values['litestream-config'] === 'string') throw new UsageError('give --replica or --litestream-config, not both')
    if (!/^(file|s3|gcs|abs|sftp):\/\/./.test(replica)) throw new UsageError(`--replica must be a replica URL (file:///path, s3://bucket/path), got "${replica}"`)
    return { replica }
  }
  if (configFile === null) return null
  const databases = await litestreamCall(() => configuredDatabases(configFile))
  const ours = databasePath(config.dataDir)
  const database = databases.length === 1 ? databases[0]! : databases.find((path) => path === ours)
  if (database === undefined) throw new CommandError(`${configFile} replicates ${databases.length ? databases.join(', ') : 'no database'}; pass --data with the directory of the one to restore`)
  return { config: configFile, database }
}

/** `fn`, its LitestreamError a failure of the command (exit 1) with Litestream's own message. */
export async function litestreamCall<T>(fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (error) {
    if (error instanceof LitestreamError) throw new CommandError(error.message)
    throw error
  }
}

/** The source as a report names it (a configuration's database, or the replica URL). */
export function describeSource(source: RestoreSource): string {
  return 'replica' in source ? source.replica : `${source.database} (${source.config})`
}

/** RFC 3339 with a zone, as Litestream takes it: `2026-05-04T13:45:00Z`, `2026-05-04T15:45:00.250+02:00`. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i

/** `--to-time`'s value as a Date, or a usage error naming the flag and the form it takes. */
export function parseRestoreTime(text: string): Date {
  const time = RFC3339.test(text) ? new Date(text) : null
  if (time === null || Number.isNaN(time.getTime())) {
    throw new UsageError(`--to-time must be an RFC 3339 time with a zone, e.g. 2026-05-04T13:45:00Z, got "${text}"`)
  }
  return time
}

/** The new data directory: created (0700) when absent; one that holds anything is refused, so nothing is overwritten. */
function newDataDirectory(path: string): string {
  const dir = resolve(path)
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new CommandError(`${dir} is not empty: restore into a new data directory`)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return dir
}

/** What a restore or a drill found, for its text and --json reports. */
export interface VerifiedCopy extends RestoredDatabase {
  file: string
  source: string
  /** The newest run or activity entry as an ISO time, null when there is none. */
  newestWrite: string | null
}

export function verifiedCopy(file: string, source: string): VerifiedCopy {
  let checked: RestoredDatabase
  try {
    checked = verifyRestoredDatabase(file)
  } catch (error) {
    throw new CommandError(`${source} is not a usable Trellis database: ${(error as Error).message}`)
  }
  const newestWrite = checked.newestWriteMicros === null ? null : new Date(Math.floor(checked.newestWriteMicros / 1000)).toISOString()
  return { file, source, ...checked, newestWrite }
}

/** The lines of a text report of a verified copy (the row counts summed; --json has them per table). */
export function reportLines(copy: VerifiedCopy): string[] {
  const rows = Object.values(copy.rows).reduce((sum, n) => sum + n, 0)
  return [
    `integrity: ${copy.integrity}`,
    `migrations: ${copy.migrationsApplied.length ? `applied ${copy.migrationsApplied.join(', ')}` : 'all applied already'}`,
    `rows: ${rows} in ${Object.keys(copy.rows).length} tables`,
    `newest write: ${copy.newestWrite ?? 'none (no run or activity entry)'}`,
  ]
}

export const restoreCommand: Command = {
  summary: 'restore the SQLite database as it was at a time from its Litestream replica into a new data directory',
  usage: 'trellis restore --to-time TIME --into DIR [--litestream-config FILE | --replica URL] [--json] [--data DIR]',
  flags: {
    'to-time': stringFlag('TIME', 'the time to restore to, RFC 3339 with a zone (2026-05-04T13:45:00Z)'),
    into: stringFlag('DIR', 'the new data directory (absent or empty) that receives trellis.db'),
    ...REPLICA_FLAGS,
    json: booleanFlag('print the report as JSON'),
  },
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags)
    const toTime = parseRestoreTime(required(parsed, 'to-time'))
    const into = required(parsed, 'into')
    const config = configFrom(parsed)
    if (config.databaseUrl !== null) throw new UsageError('restore restores the SQLite file; PostgreSQL restores to a time with its own tools (docs/backup.md "PostgreSQL")')
    const source = await replicaSource(parsed, config)
    if (source === null) throw new UsageError('say where the replica is: --litestream-config FILE (or TRELLIS_LITESTREAM_CONFIG) or --replica URL')
    const bin = await litestreamCall(() => findLitestream(config.litestreamBin))
    const created = !existsSync(resolve(into))
    const dir = newDataDirectory(into)
    const file = databasePath(dir)
    const restored = await litestreamCall(() => restoreReplica(bin, source, file, toTime.toISOString())).catch((error: Error) => {
      // Nothing restored: the directory this command made goes again, so the same command can simply be run again.
      if (created) rmSync(dir, { recursive: true, force: true })
      throw error
    })
    const copy = verifiedCopy(file, describeSource(source))
    return printReport(io, parsed, { ...copy, toTime: toTime.toISOString(), replicaChangedLastAt: restored.newestBefore, dataDir: dir }, [
      `restored ${copy.source} as of ${toTime.toISOString()} into ${file}`,
      ...(restored.newestBefore ? [`the replica's last change before that time: ${restored.newestBefore} (nothing was written after it)`] : []),
      ...reportLines(copy),
      config.secretFromEnv
        ? 'Start serve on it with the same TRELLIS_SECRET: webhook URLs depend on it.'
        : `Copy the old data directory's ${SECRET_FILE} into ${dir} before serve starts on it: webhook URLs depend on it.`,
    ], copy.integrity === 'ok' ? [] : [`integrity_check failed: ${copy.integrity} (the file is left in ${dir} to inspect)`])
  },
}

/** Prints a report (JSON with `ok` and `problems`, or its lines) and answers the exit code: 1 when there are problems. */
export function printReport(io: Io, parsed: Parsed, report: object, lines: string[], problems: string[]): number {
  if (parsed.values.json === true) io.out(JSON.stringify({ ok: problems.length === 0, problems, ...report }, null, 2))
  else {
    for (const line of lines) io.out(line)
    for (const problem of problems) io.err(`FAILED: ${problem}`)
  }
  return problems.length === 0 ? 0 : 1
}
