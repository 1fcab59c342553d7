import { migrateStore } from '../db/migrate.ts'
import { openStore } from '../db/open.ts'
import { migratePostgres } from '../db/postgres/migrate.ts'
import { openPostgres } from '../db/postgres/store.ts'
import { type Command, configFrom, parseFlags } from './command.ts'

export const migrateCommand: Command = {
  summary: 'apply pending database migrations and exit',
  usage: 'trellis migrate [--data DIR | --database-url URL]',
  flags: {},
  async run(argv, io) {
    const config = configFrom(parseFlags(argv, this.flags))
    const applied = config.databaseUrl === null ? migrateFile(config.dataDir) : await migrateServer(config.databaseUrl)
    io.out(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date')
    return 0
  },
}

function migrateFile(dataDir: string): string[] {
  const store = openStore(dataDir)
  try {
    return migrateStore(store)
  } finally {
    store.close()
  }
}

async function migrateServer(url: string): Promise<string[]> {
  const store = openPostgres(url, { max: 1 })
  try {
    return await migratePostgres(store.sql)
  } finally {
    await store.close()
  }
}
