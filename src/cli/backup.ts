/** `trellis backup FILE`: a consistent copy of the database, taken while the server runs. */
import { closeSync, existsSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { backupElsewhere } from '../db/connect.ts'
import { backupInto } from '../db/sqlite/backup.ts'
import { databasePath } from '../db/sqlite/open.ts'
import { openStore } from '../db/sqlite/store.ts'
import { BYTES } from '../lib/progress.ts'
import { SECRET_FILE } from '../lib/secret.ts'
import { WORKER_ENTRYPOINTS } from '../worker-entrypoints.ts'
import { booleanFlag, type Command, CommandError, configFrom, parseFlags, UsageError } from './command.ts'
import { progressOf, QUIET_FLAG } from './progress.ts'

export const backupCommand: Command = {
  summary: 'write a consistent copy of the database to FILE (safe while serve runs)',
  usage: 'trellis backup FILE [--force] [--quiet] [--data DIR | --database-url URL]',
  flags: { force: booleanFlag('replace an existing FILE'), quiet: QUIET_FLAG },
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags, 1)
    const file = parsed.positionals[0]
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
