/**
 * The soak's mixed load against whichever instances are alive: webhook triggers and manual runs over many records
 * and several workflows, cancels, notes and their messages, token creations and revocations, membership changes.
 * Every write the server acknowledged (a 2xx answer) goes into the ledger, which the checks hold the store to; a
 * request that died with its server (no answer) acknowledged nothing, and may or may not have taken effect.
 */
import { bearer } from '../helpers.ts'
import type { Deployment } from './deployment.ts'
import { MEMBER_ROLES, type Random, recordIds, type SoakWorkflow, WORKFLOWS } from './fixture.ts'

/** A user's membership as the load left it: the last acknowledged value, or one of the unanswered changes after it. */
interface MemberState {
  possible: Set<string>
  busy: boolean
}

export interface Ledger {
  requests: number
  /** Answers by status (`0` when the connection died with its server). */
  statuses: Record<string, number>
  runs: Map<string, { workflow: SoakWorkflow; recordId: string }>
  cancelled: Set<string>
  notes: Map<number, string>
  messages: { noteId: number; marker: string }[]
  tokens: Map<number, string>
  revoked: Set<number>
  /** Revocations left unanswered: the token may be revoked or not. */
  maybeRevoked: Set<number>
  members: Map<number, MemberState>
  acknowledged: number
  /** Answers no request of this load may get (a 5xx other than 503, an undocumented status): each described. */
  unexpected: string[]
}

export function newLedger(memberIds: number[]): Ledger {
  return {
    requests: 0,
    statuses: {},
    runs: new Map(),
    cancelled: new Set(),
    notes: new Map(),
    messages: [],
    tokens: new Map(),
    revoked: new Set(),
    maybeRevoked: new Set(),
    members: new Map(memberIds.map((id) => [id, { possible: new Set(['none']), busy: false }])),
    acknowledged: 0,
    unexpected: [],
  }
}

const PROJECT = '/v1/project/Acme'
const ENVIRONMENT = `${PROJECT}/environment/production`
/** A request that hangs past this is given up (its answer unknown, as if its server had died). */
const REQUEST_TIMEOUT_MS = 10_000

type Answer = { status: number; body: Record<string, unknown> } | null

/**
 * Runs `workers` concurrent loops of random operations until `signal` aborts. Each picks a live instance (any of them
 * on PostgreSQL) for each request.
 */
export async function driveLoad(deployment: Deployment, ledger: Ledger, random: Random, workers: number, signal: AbortSignal): Promise<void> {
  let notesMade = 0
  const { admin, trigger } = deployment.tokens

  async function call(method: string, path: string, token: string, json?: unknown): Promise<Answer> {
    const live = deployment.live()
    if (live.length === 0) {
      await Bun.sleep(10)
      return null
    }
    ledger.requests++
    try {
      const response = await fetch(`${random.pick(live)}${path}`, {
        method,
        headers: { ...bearer(token), ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
        body: json === undefined ? undefined : JSON.stringify(json),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      })
      const text = await response.text()
      ledger.statuses[response.status] = (ledger.statuses[response.status] ?? 0) + 1
      if (response.status >= 500 && response.status !== 503) ledger.unexpected.push(`${method} ${path} → ${response.status}: ${text.slice(0, 300)}`)
      return { status: response.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) }
    } catch {
      ledger.statuses['0'] = (ledger.statuses['0'] ?? 0) + 1
      return null
    }
  }

  /** What a 2xx answer means to the ledger; anything else acknowledged nothing. */
  const acknowledge = () => ledger.acknowledged++

  async function run(): Promise<void> {
    const workflow = random.pick(WORKFLOWS)
    const recordId = random.pick(recordIds)
    const manual = random.next() < 0.3
    const answer = manual
      ? await call('POST', `${ENVIRONMENT}/workflow-runs`, admin, { teamName: 'Support', workflowName: workflow, recordId })
      : await call('POST', deployment.hooks[workflow], trigger, { record_id: recordId })
    if (answer?.status === 202) {
      ledger.runs.set(answer.body.runId as string, { workflow, recordId })
      acknowledge()
    }
  }

  async function cancel(): Promise<void> {
    const recent = [...ledger.runs.keys()].slice(-40)
    if (recent.length === 0) return
    const runId = random.pick(recent)
    const answer = await call('POST', `/v1/workflow-runs/${runId}/cancel`, admin)
    if (answer?.status === 200) {
      ledger.cancelled.add(runId)
      acknowledge()
    }
  }

  async function note(): Promise<void> {
    const title = `soak note ${++notesMade}-${Math.floor(random.next() * 1e9)}`
    const answer = await call('POST', `${ENVIRONMENT}/notes`, admin, { recordId: random.pick(recordIds), collectionName: 'orders', teamName: 'Support', title, content: '<p>soak</p>' })
    if (answer?.status === 201) {
      ledger.notes.set(answer.body.id as number, title)
      acknowledge()
    }
  }

  async function message(): Promise<void> {
    const notes = [...ledger.notes.keys()]
    if (notes.length === 0) return note()
    const noteId = random.pick(notes)
    const marker = `m${Math.floor(random.next() * 1e12)}`
    const answer = await call('POST', `${ENVIRONMENT}/notes/${noteId}/messages`, admin, { content: `<p>${marker}</p>` })
    if (answer?.status === 201) {
      ledger.messages.push({ noteId, marker })
      acknowledge()
    }
  }

  async function createToken(): Promise<void> {
    const answer = await call('POST', '/v1/account/tokens', admin, { name: `soak ${Math.floor(random.next() * 1e9)}`, projectName: 'Acme', scopes: ['notes:read'] })
    if (answer?.status === 201) {
      ledger.tokens.set(answer.body.id as number, answer.body.token as string)
      acknowledge()
    }
  }

  async function revokeToken(): Promise<void> {
    const live = [...ledger.tokens.keys()].filter((id) => !ledger.revoked.has(id))
    if (live.length < 3) return createToken()
    const id = random.pick(live)
    const answer = await call('DELETE', `/v1/account/tokens/${id}`, admin)
    if (answer?.status === 204) {
      ledger.revoked.add(id)
      ledger.maybeRevoked.delete(id)
      acknowledge()
    } else if (answer === null) {
      ledger.maybeRevoked.add(id)
    }
  }

  async function changeMember(): Promise<void> {
    const idle = [...ledger.members.entries()].filter(([, state]) => !state.busy)
    if (idle.length === 0) return
    const [userId, state] = random.pick(idle)
    const role = random.next() < 0.2 ? 'none' : random.pick(MEMBER_ROLES)
    state.busy = true // one change at a time per user: the last acknowledged one is what must hold
    try {
      const path = `${PROJECT}/members/${userId}`
      const answer = role === 'none' ? await call('DELETE', path, admin) : await call('PUT', path, admin, { role })
      if (answer?.status === 200 || answer?.status === 204) {
        state.possible = new Set([role])
        acknowledge()
      } else if (answer?.status === 404 && role === 'none') {
        state.possible = new Set(['none']) // not a member: what was asked holds already
      } else if (answer === null) {
        state.possible.add(role)
      }
    } finally {
      state.busy = false
    }
  }

  const operations: [number, () => Promise<void>][] = [
    [50, run],
    [6, cancel],
    [12, note],
    [12, message],
    [6, createToken],
    [5, revokeToken],
    [9, changeMember],
  ]
  const total = operations.reduce((sum, [weight]) => sum + weight, 0)
  const pickOperation = () => {
    let at = random.next() * total
    for (const [weight, operation] of operations) if ((at -= weight) < 0) return operation
    return operations[0]![1]
  }

  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (!signal.aborted) await pickOperation()()
    }),
  )
}
