/**
 * The worker behind `psqlSync` and `freshDatabaseSync` (./sync-postgres.ts): one connection per database URL, kept
 * open, so a test's synchronous statement costs a round trip instead of a psql process and a new connection; and the
 * next fresh database of a template made ahead, while the test that asked for the last one runs.
 */
import { SQL } from 'bun'

declare const self: Worker

export interface Ask {
  kind: 'statement' | 'fresh' | 'drop'
  url: string
  /** The statement (`statement`), the template (`fresh`), the database (`drop`). */
  text: string
  /** Where the answer goes: a flag (Int32 at 0: 0 waiting, 1 answered) and the answer's length, then its UTF-8 bytes. */
  answer?: SharedArrayBuffer
}

export type Answer = { ok: string } | { error: string }

const connections = new Map<string, SQL>()
const connection = (url: string) => {
  let sql = connections.get(url)
  if (!sql) connections.set(url, (sql = new SQL({ url, max: 1, idleTimeout: 0 })))
  return sql
}

/** A value as psql's unaligned output prints it (json re-serialised, booleans t/f, null empty). */
function asText(value: unknown): string {
  if (value === null || value === undefined) return ''
  if (typeof value === 'boolean') return value ? 't' : 'f'
  if (value instanceof Date) return value.toISOString()
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

async function statement(url: string, text: string): Promise<string> {
  const rows = (await connection(url).unsafe(text).values()) as unknown[][] | undefined
  return (rows ?? []).map((row) => row.map(asText).join('|')).join('\n')
}

let made = 0
/** The database made ahead for each template URL (one at a time), its name. */
const ahead = new Map<string, Promise<string>>()

async function makeFrom(url: string, template: string): Promise<string> {
  const name = `trellis_${process.pid}_w${++made}`
  // A template must have no connections. A test's own database made into one (a fixture applied once, copied per
  // test) may still have some that outlive its store: this worker's, and a pooler's idle server connections
  // (PgBouncer keeps them after its clients are gone).
  await closeConnection(url.replace(/\/[^/]*$/, `/${template}`))
  await connection(url).unsafe('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [template])
  await connection(url).unsafe(`CREATE DATABASE ${name} TEMPLATE ${template} STRATEGY FILE_COPY`)
  return name
}

async function closeConnection(databaseUrl: string): Promise<void> {
  const own = connections.get(databaseUrl)
  if (!own) return
  connections.delete(databaseUrl)
  await own.close().catch(() => {})
}

async function fresh(url: string, template: string): Promise<string> {
  const key = `${url} ${template}`
  const ready = ahead.get(key) ?? makeFrom(url, template)
  const name = await ready
  const next = makeFrom(url, template)
  next.catch(() => {}) // a failure surfaces when it is asked for
  ahead.set(key, next)
  return name
}

async function drop(url: string, name: string): Promise<string> {
  await closeConnection(url.replace(/\/[^/]*$/, `/${name}`))
  await connection(url).unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  return ''
}

const encoder = new TextEncoder()

self.onmessage = async (event: MessageEvent<Ask>) => {
  const { kind, url, text, answer } = event.data
  let result: Answer
  try {
    result = { ok: await (kind === 'statement' ? statement(url, text) : kind === 'fresh' ? fresh(url, text) : drop(url, text)) }
  } catch (error) {
    result = { error: error instanceof Error ? error.message : String(error) }
  }
  if (!answer) return
  const bytes = encoder.encode(JSON.stringify(result))
  const header = new Int32Array(answer, 0, 2)
  if (bytes.length > answer.byteLength - 8) {
    const tooLong = encoder.encode(JSON.stringify({ error: `the answer (${bytes.length} bytes) is larger than the ${answer.byteLength - 8} bytes given for it` }))
    new Uint8Array(answer, 8).set(tooLong)
    header[1] = tooLong.length
  } else {
    new Uint8Array(answer, 8).set(bytes)
    header[1] = bytes.length
  }
  Atomics.store(header, 0, 1)
  Atomics.notify(header, 0)
}
