import { migrateConfiguredStore } from '../db/connect.ts'
import { type Command, configFrom, parseFlags } from './command.ts'

export const migrateCommand: Command = {
  summary: 'apply pending database migrations and exit',
  usage: 'trellis migrate [--data DIR | --database-url URL]',
  flags: {},
  async run(argv, io) {
    const applied = await migrateConfiguredStore(configFrom(parseFlags(argv, this.flags)))
    io.out(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date')
    return 0
  },
}
