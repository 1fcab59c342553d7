/**
 * The bench's approval tasks, straight into the schema (bench/seed.ts calls it after the notes): each task with the
 * run it parks (open: `waiting` until the task closes, as a task step leaves it; closed: finished), its assignees and
 * its decisions, with the invariants the app keeps — task and run ids UUIDv7s of their `createdAt`, strictly
 * increasing per environment, one active run per workflow and record, one decision per user and task. Tasks carry no
 * activity entries or run events (the activity scenario's page stays the notes' entries). Who is in them:
 * - the inbox user: `inbox` open tasks they may decide (assigned to them, to their approvers' team, or both),
 *   beside open tasks assigned to them they may not decide (their own requests; a second approval after theirs);
 * - the decider: `decisions` open tasks assigned to them, needing one approval (the decision scenario's, each decided
 *   once over the whole bench);
 * - everyone else: the remaining tasks, a tenth of them open, the rest approved, rejected, expired or cancelled
 *   (with their decisions), over the approvers' teams and their members — the inbox user's history included.
 */
import type { Database } from 'bun:sqlite'
import { UNTIL_TASK_CLOSES } from '../src/db/queue.ts'
import { taskIdAt } from '../src/db/tasks.ts'
import type { Micros } from '../src/lib/time.ts'

export interface TaskSeedSizes {
  /** Every task, all kinds together. */
  tasks: number
  /** Open tasks the inbox user may decide. */
  inbox: number
  /** Open tasks for the decision scenario. */
  decisions: number
}

/** The bench's tasks: the inbox user's 10,000 open ones among 360,000, and the decision scenario's 300,000 (every run of it takes its own, (b)'s too: see docs/performance.md). */
export const BENCH_TASKS: TaskSeedSizes = { tasks: 360_000, inbox: 10_000, decisions: 300_000 }

/** A workflow whose first step is the `approve` task step. */
export interface ApprovalWorkflow {
  id: number
  versionId: number
  environmentIndex: number
  teamId: number
  collectionId: number
  /** The record keys of its collection in its environment. */
  records: string[]
}

export interface TaskSeedPlace {
  sqlite: Database
  rand: () => number
  /** Production first. */
  environmentIds: number[]
  workflows: ApprovalWorkflow[]
  userIds: number[]
  /** The approvers' teams; user `i` (of `userIds`) is a member of `approverTeamIds[approverTeamOf(i)]`. */
  approverTeamIds: number[]
  approverTeamOf: (userIndex: number) => number
  inboxUserIndex: number
  deciderIndex: number
  /** The newest task is created before this (ms), the oldest `spanMs` before it. */
  newestBefore: number
  spanMs: number
}

export interface TaskSeedResult {
  tasks: number
  open: number
  assignees: number
  decisions: number
  /** The decision scenario's tasks, oldest first. */
  decisionTaskIds: string[]
}

type Kind = 'inbox' | 'own-request' | 'decided-already' | 'pool' | 'other'
const CLOSED: { status: string; runStatus: string; decision: 'approve' | 'reject' | null; share: number }[] = [
  { status: 'approved', runStatus: 'succeeded', decision: 'approve', share: 0.6 },
  { status: 'rejected', runStatus: 'failed', decision: 'reject', share: 0.2 },
  { status: 'expired', runStatus: 'failed', decision: null, share: 0.1 },
  { status: 'cancelled', runStatus: 'cancelled', decision: null, share: 0.1 },
]
/** Of the inbox user's open tasks they may not decide: as many of their own requests, and of tasks awaiting a second approval after theirs. */
const HIDDEN_EACH = 300
const OTHER_OPEN_SHARE = 0.1

/** Seeds the tasks, their runs, assignees and decisions in batched transactions; the indexes are the caller's to drop and rebuild. */
export function seedTasks(p: TaskSeedPlace, sizes: TaskSeedSizes): TaskSeedResult {
  const { sqlite, rand } = p
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!
  const kinds: Kind[] = [
    ...Array<Kind>(sizes.inbox).fill('inbox'),
    ...Array<Kind>(HIDDEN_EACH).fill('own-request'),
    ...Array<Kind>(HIDDEN_EACH).fill('decided-already'),
    ...Array<Kind>(sizes.decisions).fill('pool'),
  ]
  if (kinds.length > sizes.tasks) throw new Error(`${kinds.length} inbox and decision tasks do not fit in ${sizes.tasks}`)
  kinds.push(...Array<Kind>(sizes.tasks - kinds.length).fill('other'))
  // Spread every kind over the whole time span (Fisher–Yates with the seed's PRNG).
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1))
    ;[kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!]
  }

  const insertRun = sqlite.prepare(`INSERT INTO runs (id, workflow_id, workflow_version_id, environment_id, record_id, user_id, token_id, "trigger", status,
    next_step, available_at, attempts, created_at, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, NULL, 'webhook', ?, ?, ?, 1, ?, ?, ?)`)
  const insertTask = sqlite.prepare(`INSERT INTO tasks (id, run_id, step_index, step_name, environment_id, workflow_id, team_id, collection_id, record_id,
    requester_id, title, approvals_required, allow_requester, status, on_timeout, escalated, created_at, closed_at) VALUES (?, ?, 0, 'approve', ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 'fail', 0, ?, ?)`)
  const assignTeam = sqlite.prepare('INSERT INTO task_assignees (task_id, team_id, escalated, task_created_at) VALUES (?, ?, 0, ?)')
  const assignUser = sqlite.prepare('INSERT INTO task_assignees (task_id, user_id, escalated, task_created_at) VALUES (?, ?, 0, ?)')
  const insertDecision = sqlite.prepare('INSERT INTO task_decisions (task_id, user_id, decision, created_at) VALUES (?, ?, ?, ?)')

  const users = p.userIds.length
  const inboxTeam = p.approverTeamOf(p.inboxUserIndex)
  /** A member of an approvers' team other than the inbox user and the decider (who decide only their own tasks). */
  const memberOf = (team: number): number => {
    for (;;) {
      const i = 1 + Math.floor(rand() * (users - 1))
      if (p.approverTeamOf(i) === team && i !== p.inboxUserIndex && i !== p.deciderIndex) return i
    }
  }
  const someoneElse = (): number => {
    for (;;) {
      const i = 1 + Math.floor(rand() * (users - 1))
      if (i !== p.inboxUserIndex && i !== p.deciderIndex) return i
    }
  }
  const workflowsOf = p.environmentIds.map((_, e) => p.workflows.filter((w) => w.environmentIndex === e))
  /** Open tasks so far per environment: the next one's (workflow, record) pair, never an active run's already. */
  const openSoFar = p.environmentIds.map(() => 0)
  const openPlace = (e: number) => {
    const list = workflowsOf[e]!
    const k = openSoFar[e]!++
    const workflow = list[k % list.length]!
    const index = Math.floor(k / list.length)
    if (index >= workflow.records.length) throw new Error(`more open tasks in environment ${e} than its approval workflows' records`)
    return { workflow, recordId: workflow.records[index]! }
  }

  const decisionTaskIds: string[] = []
  let open = 0
  let assignees = 0
  let decisions = 0
  const spacing = p.spanMs / sizes.tasks
  let at = p.newestBefore - p.spanMs
  const BATCH = 10_000
  for (let done = 0; done < kinds.length; ) {
    const count = Math.min(BATCH, kinds.length - done)
    sqlite.transaction(() => {
      for (let n = done; n < done + count; n++) {
        const kind = kinds[n]!
        // Two ms at least between tasks: the run is created 500 µs before its task, both strictly increasing.
        at += 2 + Math.floor(rand() * 2 * spacing)
        const taskAt = (at * 1000 + Math.floor(rand() * 500)) as Micros
        const runAt = (taskAt - 500) as Micros
        const closedIndex = kind === 'other' && rand() >= OTHER_OPEN_SHARE ? closedKind(rand()) : null
        const isOpen = closedIndex === null
        const environment = kind === 'other' && rand() < 0.1 ? 1 : 0
        const { workflow, recordId } = isOpen ? openPlace(environment) : { workflow: pick(workflowsOf[environment]!), recordId: '' }
        const record = recordId || pick(workflow.records)
        const requester = kind === 'own-request' ? p.inboxUserIndex : someoneElse()
        const taskId = taskIdAt(taskAt)
        const runId = taskIdAt(runAt)
        const startedMs = Math.floor(runAt / 1000)
        const closedMs = isOpen ? null : startedMs + 60_000 + Math.floor(rand() * 86_400_000)
        const closed = closedIndex === null ? null : CLOSED[closedIndex]!
        insertRun.run(
          runId, workflow.id, workflow.versionId, p.environmentIds[environment]!, record, p.userIds[requester]!, isOpen ? 'waiting' : closed!.runStatus,
          closed?.status === 'approved' ? 2 : 0, isOpen ? UNTIL_TASK_CLOSES : startedMs, runAt, startedMs, closedMs,
        )
        insertTask.run(
          taskId, runId, p.environmentIds[environment]!, workflow.id, workflow.teamId, workflow.collectionId, record, p.userIds[requester]!,
          `Approve ${record}`, kind === 'decided-already' ? 2 : 1, isOpen ? 'open' : closed!.status, taskAt, closedMs,
        )
        if (isOpen) open++
        // Assignees: the inbox user's tasks name them, their team or both; the decider's name them; the others a team,
        // now and then a user too (the inbox user and their team among them, for the closed ones: their history).
        const named: { team?: number; user?: number } = {}
        if (kind === 'inbox' || kind === 'own-request' || kind === 'decided-already') {
          const r = rand()
          if (r < 0.55) named.user = p.inboxUserIndex
          if (r >= 0.45) named.team = inboxTeam
        } else if (kind === 'pool') {
          named.user = p.deciderIndex
          decisionTaskIds.push(taskId)
        } else {
          let team = Math.floor(rand() * p.approverTeamIds.length)
          if (isOpen && team === inboxTeam) team = (team + 1) % p.approverTeamIds.length
          named.team = team
          if (rand() < 0.2) named.user = isOpen ? someoneElse() : rand() < 0.1 ? p.inboxUserIndex : someoneElse()
        }
        if (named.team !== undefined) assignTeam.run(taskId, p.approverTeamIds[named.team]!, taskAt)
        if (named.user !== undefined) assignUser.run(taskId, p.userIds[named.user]!, taskAt)
        assignees += (named.team === undefined ? 0 : 1) + (named.user === undefined ? 0 : 1)
        const decision = kind === 'decided-already' ? 'approve' : closed?.decision
        if (decision) {
          const decider = kind === 'decided-already' ? p.inboxUserIndex : (named.user ?? memberOf(named.team!))
          insertDecision.run(taskId, p.userIds[decider]!, decision, closedMs === null ? taskAt + 1000 : closedMs * 1000)
          decisions++
        }
      }
    })()
    done += count
  }
  return { tasks: kinds.length, open, assignees, decisions, decisionTaskIds }
}

/** The index in CLOSED of a closed task's status, from a uniform draw. */
function closedKind(r: number): number {
  let sum = 0
  for (const [i, c] of CLOSED.entries()) {
    sum += c.share
    if (r < sum) return i
  }
  return CLOSED.length - 1
}
