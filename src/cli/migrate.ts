import { migrateStore } from '../db/migrate.ts'
import { openStore } from '../db/open.ts'
import { type Command, configFrom, parseFlags } from './command.ts'

export const migrateCommand: Command = {
  summary: 'apply pending database migrations and exit',
  usage: 'trellis migrate [--data DIR]',
  flags: {},
  async run(argv, io) {
    const config = configFrom(parseFlags(argv, this.flags))
    const store = openStore(config.dataDir)
    try {
      const applied = migrateStore(store)
      io.out(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date')
      return 0
    } finally {
      store.close()
    }
  },
}
