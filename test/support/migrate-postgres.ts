/** `bun test/support/migrate-postgres.ts URL`: applies the PostgreSQL migrations to the database at URL (./postgres-cluster.ts's template). */
import { SQL } from 'bun'
import { migratePostgres } from '../../src/db/postgres/migrate.ts'

const url = process.argv[2]
if (!url) throw new Error('usage: bun test/support/migrate-postgres.ts postgres://…')
const sql = new SQL({ url, max: 1 })
try {
  await migratePostgres(sql)
} finally {
  await sql.close()
}
