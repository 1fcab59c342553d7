import { migrate } from '../db/migrate.ts'
import { openStore } from '../db/open.ts'
import { type Command, configFrom, parseFlags } from './command.ts'

export const migrateCommand: Command = {
  summary: 'apply pending database migrations and exit',
  usage: 'trellis migrate [--data DIR]',
  async run(argv, io) {
    const parsed = parseFlags(argv, {})
    if (parsed.help) return io.out(this.usage), 0
    const config = configFrom(parsed)
    const store = openStore(config.dataDir)
    try {
      const applied = migrate(store.sqlite)
      io.out(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date')
      return 0
    } finally {
      store.close()
    }
  },
}
