/**
 * Writes src/db/sqlite/migrations.generated.ts from drizzle/meta/_journal.json (and src/db/postgres/migrations.generated.ts
 * from drizzle/postgres/): one text import per migration,
 * so `bun build --compile` embeds the SQL and the binary never reads the source tree at run time.
 * Run by `npm run db:generate` after drizzle-kit; a test fails when the module is stale.
 */
import { renderMigrationsModule } from '../src/db/migrations-module.ts'

const root = new URL('..', import.meta.url).pathname
const journal = await Bun.file(`${root}drizzle/meta/_journal.json`).json()
await Bun.write(`${root}src/db/sqlite/migrations.generated.ts`, renderMigrationsModule(journal))
console.log(`embedded ${journal.entries.length} SQLite migration(s)`)
// PostgreSQL's: the same, from drizzle/postgres/.
const pgJournalPath = 'drizzle/postgres/meta/_journal.json'
const pgJournal = await Bun.file(`${root}${pgJournalPath}`).json()
await Bun.write(`${root}src/db/postgres/migrations.generated.ts`, renderMigrationsModule(pgJournal, '../../../drizzle/postgres', pgJournalPath))
console.log(`embedded ${pgJournal.entries.length} PostgreSQL migration(s)`)
