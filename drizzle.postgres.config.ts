import { defineConfig } from 'drizzle-kit'

/** The PostgreSQL schema's migrations (issue 18): `npm run db:generate` runs both configs. */
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/postgres/schema.ts',
  out: './drizzle/postgres',
})
