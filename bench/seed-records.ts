/**
 * The bench's typed collection (bench/seed.ts calls it after the notes and tasks): `invoices` in production, its schema
 * set through `apply` (so its indexed fields have their expression indexes), its records straight into the schema —
 * keys `INV-<n>`, `created_at` (ms, as record times are) strictly increasing in id order, data that conforms to the schema.
 */
import type { Database } from 'bun:sqlite'

export const TYPED_COLLECTION = 'invoices'
const STATUSES = ['draft', 'open', 'paid', 'void']

/** The collection's schema as the apply file writes it: `amount` and `status` indexed. */
export const TYPED_SCHEMA = {
  fields: [
    { name: 'amount', type: 'number', required: true, indexed: true },
    { name: 'status', type: 'select', options: STATUSES, required: true, indexed: true },
    { name: 'customer', type: 'text' },
    { name: 'due', type: 'date' },
    { name: 'paid', type: 'boolean' },
  ],
}

/** The record key of the `i`th invoice. */
export const invoiceKey = (i: number) => `INV-${1_000_000 + i}`

export interface TypedRecordsPlace {
  sqlite: Database
  rand: () => number
  environmentId: number
  collectionId: number
  count: number
  /** The newest record is created before this (ms), one every `spacingMs` before it. */
  newestBefore: number
  batch: number
}

/** Inserts the invoices (the caller has dropped and will rebuild the records' indexes around it). */
export function seedTypedRecords(o: TypedRecordsPlace): void {
  const insert = o.sqlite.prepare('INSERT INTO records (environment_id, collection_id, record_key, data, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)')
  const spacingMs = 1_000
  let createdMs = o.newestBefore - o.count * spacingMs
  for (let done = 0; done < o.count; ) {
    const count = Math.min(o.batch, o.count - done)
    o.sqlite.transaction(() => {
      for (let i = done; i < done + count; i++) {
        createdMs += spacingMs
        const day = new Date(createdMs + Math.floor(o.rand() * 60) * 86_400_000).toISOString().slice(0, 10)
        const status = STATUSES[Math.floor(o.rand() * STATUSES.length)]!
        const data = { amount: Math.round(o.rand() * 1_000_000) / 100, status, customer: `CUS-${100_000 + Math.floor(o.rand() * 50_000)}`, due: day, paid: status === 'paid' }
        insert.run(o.environmentId, o.collectionId, invoiceKey(i), JSON.stringify(data), createdMs, createdMs)
      }
    })()
    done += count
  }
}
