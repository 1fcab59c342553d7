/**
 * What the crash soak runs against: Acme (examples/acme.yaml) plus records the load spreads over, workflows that
 * leave a trace of every data step taken (each appends its run's id to a field of its own on the record, and one
 * writes a note naming its run), and users whose membership the load changes. And the seeded randomness.
 */
import { acmeDocument, type AcmeDocument, acmeProject, ordersWorkflow } from '../support/acme.ts'

export const RECORDS = 40
export const recordIds = Array.from({ length: RECORDS }, (_, i) => `soak_${i + 1}`)

/** Per workflow the record field its runs append their id to (one field each: runs of one workflow on a record never overlap). */
export const TRAILS = { 'Soak append': 'trail_a', 'Soak note': 'trail_b', 'Soak pause': 'trail_c' } as const
export type SoakWorkflow = keyof typeof TRAILS
export const WORKFLOWS = Object.keys(TRAILS) as SoakWorkflow[]

/** The title of the note 'Soak note' writes; its content names the run (`run <id>`). */
export const RUN_NOTE_TITLE = 'soak run note'

/** Users whose project membership the load changes (alice stays the admin whose token drives the load). */
export const MEMBERS = ['soak1', 'soak2', 'soak3', 'soak4'].map((name) => ({ username: name, email: `${name}@example.com` }))
export const MEMBER_ROLES = ['user', 'editor', 'developer', 'manager', 'admin'] as const

const append = (field: string) => ({ type: 'update', name: `append ${field}`, set: { [field]: `{{record.${field}}} {{run.id}}` } })

export function soakDocument(): AcmeDocument {
  const document = acmeDocument()
  const fast = { webhook: { enabled: true, ratePerMinute: 100_000 } }
  document.users.push(...MEMBERS)
  // An instance administrator, so that "never zero active instance administrators" has something to hold.
  Object.assign(document.users.find((u) => u.username === 'alice')!, { instanceAdmin: true })
  const acme = acmeProject(document)
  acme.workflows!.push(
    ordersWorkflow('Soak append', [{ type: 'load' }, append(TRAILS['Soak append'])], fast),
    ordersWorkflow('Soak note', [append(TRAILS['Soak note']), { type: 'note', name: 'note', title: RUN_NOTE_TITLE, content: '<p>run {{run.id}}</p>' }], fast),
    // A short pause: runs stay active across a kill, parked (`waiting`) and then taken up again.
    ordersWorkflow('Soak pause', [append(TRAILS['Soak pause']), { type: 'wait', name: 'pause', seconds: 1 }, { type: 'update', name: 'after pause', set: { paused: 'done' } }], fast),
  )
  for (const id of recordIds) acme.records!.push({ environment: 'production', collection: 'orders', id, data: { status: 'paid' } })
  return document
}

/** A small seeded PRNG (mulberry32): the same seed gives the same moments and the same choices of load. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    between: (min, max) => min + next() * (max - min),
    pick: (items) => items[Math.floor(next() * items.length)]!,
  }
}

export interface Random {
  /** In [0, 1). */
  next(): number
  between(min: number, max: number): number
  pick<T>(items: readonly T[]): T
}
