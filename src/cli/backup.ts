/** `trellis backup FILE`: a consistent copy of the database, taken while the server runs; `trellis backup drill` (./backup-drill.ts). */
import { closeSync, existsSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { backupElsewhere } from '../db/connect.ts'
import { backupInto } from '../db/sqlite/backup.ts'
import { databasePath } from '../db/sqlite/open.ts'
import { openStore } from '../db/sqlite/store.ts'
import { BYTES } from '../lib/progress.ts'
import { SECRET_FILE } from '../lib/secret.ts'
import { WORKER_ENTRYPOINTS } from '../worker-entrypoints.ts'
import { runDrill } from './backup-drill.ts'
import { booleanFlag, type Command, CommandError, configFrom, parseFlags, stringFlag, UsageError } from './command.ts'
import { progressOf, QUIET_FLAG } from './progress.ts'
import { REPLICA_FLAGS } from './restore.ts'

/** The flags of `backup drill` alone. */
const DRILL_FLAGS = {
  from: stringFlag('DIR|FILE', 'drill: the directory of `trellis backup` files (its newest is restored), or one such file'),
  ...REPLICA_FLAGS,
  'max-age': stringFlag('AGE', 'drill: fail when the newest restorable write is older than this (90m, 26h, 2d)'),
  json: booleanFlag('drill: print the report as JSON'),
}

export const backupCommand: Command = {
  summary: 'write a consistent copy of the database to FILE (safe while serve runs); `backup drill` restores and checks the newest backup',
  usage: [
    'trellis backup FILE [--force] [--quiet] [--data DIR | --database-url URL]',
    '       trellis backup drill [--from DIR | --litestream-config FILE | --replica URL] [--max-age AGE] [--json]',
  ].join('\n'),
  flags: { force: booleanFlag('replace an existing FILE'), quiet: QUIET_FLAG, ...DRILL_FLAGS },
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags, 1)
    const file = parsed.positionals[0]
    // A backup FILE named `drill` in the working directory is written as ./drill.
    if (file === 'drill') {
      if (parsed.values.force !== undefined) throw new UsageError('--force is for writing a backup FILE, not for the drill')
      return runDrill(parsed, io)
    }
    const drillFlag = Object.keys(DRILL_FLAGS).find((flag) => parsed.values[flag] !== undefined)
    if (drillFlag) throw new UsageError(`--${drillFlag} is a flag of \`trellis backup drill\``)
    if (!file) throw new UsageError('the backup FILE is required')
    const config = configFrom(parsed)
    const elsewhere = backupElsewhere(config)
    if (elsewhere !== null) throw new CommandError(elsewhere)
    const source = databasePath(config.dataDir)
    if (!existsSync(source)) throw new CommandError(`no database at ${source} (wrong --data?)`)
    const target = resolve(file)
    if (target === resolve(source)) throw new CommandError('the backup FILE cannot be the database itself')
    if (!existsSync(dirname(target))) throw new CommandError(`directory ${dirname(target)} does not exist`)
    if (existsSync(target) && parsed.values.force !== true) throw new CommandError(`${target} already exists; pass --force to replace it`)

    // Into a new file beside the target, renamed over it at the end: a failed or interrupted backup never
    // leaves a half-written FILE, nor destroys the previous one. Mode 0600: it holds password and token hashes.
    const partial = join(dirname(target), `.${basename(target)}.partial-${process.pid}`)
    closeSync(openSync(partial, 'wx', 0o600))
    const store = openStore(config.dataDir)
    const progress = progressOf(io, parsed, BYTES)
    try {
      await backupInto(store, partial, WORKER_ENTRYPOINTS.backup, progress)
      renameSync(partial, target)
    } catch (error) {
      progress.abandon()
      rmSync(partial, { force: true })
      throw new CommandError(`backup failed: ${(error as Error).message}`)
    } finally {
      store.close()
    }
    const size = statSync(target).size
    io.out(`${target} (${size} bytes)`)
    io.out(
      config.secretFromEnv
        ? 'The instance secret comes from TRELLIS_SECRET: keep it with the backup, webhook URLs depend on it.'
        : `Keep ${join(config.dataDir, SECRET_FILE)} with the backup: webhook URLs depend on it.`,
    )
    return 0
  },
}
