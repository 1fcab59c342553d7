/** `trellis db copy --from FILE --to URL`: move a deployment's SQLite database into an empty PostgreSQL database. */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { DATABASE_FILE } from '../db/sqlite/open.ts'
import { CopyRefused, copySqliteToPostgres } from '../db/sqlite-to-postgres.ts'
import { ROWS } from '../lib/progress.ts'
import { type Command, CommandError, parseFlags, required, stringFlag, UsageError } from './command.ts'
import { progressOf, QUIET_FLAG } from './progress.ts'

export const dbCommand: Command = {
  summary: 'copy a SQLite database into an empty PostgreSQL database, verified table by table',
  usage: 'trellis db copy --from FILE|DIR --to postgres://…',
  flags: {
    from: stringFlag('FILE', `the SQLite database file, or a data directory holding ${DATABASE_FILE} (stop serve first)`),
    to: stringFlag('URL', 'the PostgreSQL database, postgres://user:password@host:port/name (it must hold no rows)'),
    quiet: QUIET_FLAG,
  },
  storeFlags: false,
  async run(argv, io) {
    const parsed = parseFlags(argv, this.flags, 1, this)
    if (parsed.positionals[0] !== 'copy') throw new UsageError('usage: trellis db copy --from FILE|DIR --to postgres://…')
    const from = required(parsed, 'from')
    const to = required(parsed, 'to')
    if (!/^postgres(ql)?:\/\//.test(to)) throw new UsageError('--to must be a postgres:// URL')
    const file = existsSync(from) && statSync(from).isDirectory() ? join(from, DATABASE_FILE) : from
    if (!existsSync(file)) throw new CommandError(`no SQLite database at ${file}`)
    const progress = progressOf(io, parsed, ROWS)
    try {
      const tables = await copySqliteToPostgres(file, to, progress)
      progress.finish('db copy')
      for (const t of tables) io.out(`${t.table}: ${t.rows} rows, checksum ${t.checksum.slice(0, 16)} (verified)`)
      io.out(`copied ${tables.reduce((sum, t) => sum + t.rows, 0)} rows in ${tables.length} tables`)
      return 0
    } catch (error) {
      progress.abandon()
      if (error instanceof CopyRefused) throw new CommandError(error.message)
      throw new CommandError(`copy failed, nothing was copied: ${(error as Error).message.replaceAll(to, '<url>')}`)
    }
  },
}
