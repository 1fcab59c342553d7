/**
 * Which due runs a claim starts: the fair share between projects and the workflows' concurrency
 * limits, written once for both stores. The claim (src/db/queue.ts `claimRuns`) gathers the facts — each
 * environment's oldest due runs, the runs running, and where a limit holds some of those back each of the
 * environment's workflows' — and starts the runs in `claimOrder`'s order, as many as it has free workers (on
 * PostgreSQL skipping any another instance is starting). Pure functions: no SQL here.
 *
 * The rules, per claim of `free` workers of one instance:
 * - **Workflow limit** (global): a workflow with `concurrency: N` never has more than N runs `running`, counted over
 *   every instance; runs over it stay due (queued, or waiting with their time come) and start as running ones end.
 * - **Fair share** (per instance): the workers are handed out one at a time, each to the project that holds the fewest
 *   of this instance's workers among the projects with a run it may start (ties: the older run), and within a project
 *   to its oldest such run. So while runs of more than one project are due, no project is given a worker while it
 *   holds `fairShare(C, N)` = ceil(C / N) of the instance's C workers (N: projects with such runs), and a project
 *   alone may use every worker. Nothing running is interrupted: a project that took every worker while it was alone
 *   gives them up as its runs end.
 * - **Reserve** (per instance): while the instance has more than one project with a published workflow, no project
 *   holds more than `projectCap(C)` = C − ceil(C / 4) of its workers (3 of the default 4, at least 1): a quarter is
 *   kept for the other projects, so a run of theirs that comes due while one project's slow runs fill the workers
 *   starts at the next claim instead of waiting for one of those runs to end.
 */

/** A due run a claim may start. */
export interface ClaimCandidate {
  id: string
  workflowId: number
  environmentId: number
  projectId: number
  availableAt: number
  /** Its workflow's `concurrency`, or null (no limit). */
  concurrencyLimit: number | null
}

/** A run `running` now, on any instance. */
export interface RunningRun {
  workflowId: number
  projectId: number
  /** Held by the claiming instance (its lease owner). */
  mine: boolean
}

export interface ClaimFacts {
  running: readonly RunningRun[]
  /**
   * The workflows with a limit whose runs this claim may start: on PostgreSQL those whose rows it locked (another
   * instance's claim holds the others, and counts for them); null on SQLite, whose single writer holds them all.
   */
  startable: ReadonlySet<number> | null
  /** The most workers of this instance one project may hold (`projectCap`); Infinity when nothing is reserved. */
  projectCap: number
}

/**
 * The most of an instance's `concurrency` workers one project may hold: all of them when it is the only project with a
 * published workflow, else all but a quarter (rounded up; at least 1 — with one worker nothing can be kept back).
 */
export function projectCap(concurrency: number, projectsWithWorkflows: number): number {
  if (projectsWithWorkflows <= 1 || !Number.isFinite(concurrency)) return Infinity
  return Math.max(1, concurrency - Math.ceil(concurrency / 4))
}

/** How many more runs of the candidate's workflow may start now (Infinity without a limit). */
export function roomOf(candidate: Pick<ClaimCandidate, 'workflowId' | 'concurrencyLimit'>, facts: ClaimFacts): number {
  if (candidate.concurrencyLimit === null) return Infinity
  if (facts.startable !== null && !facts.startable.has(candidate.workflowId)) return 0
  const running = facts.running.filter((run) => run.workflowId === candidate.workflowId).length
  return Math.max(0, candidate.concurrencyLimit - running)
}

/**
 * Oldest due first. Sorts are stable: runs due at the same time keep the order the store read them in, the order they
 * were queued (SQLite: insertion order; PostgreSQL: id order, the time order of the UUIDv7 ids runs are queued under).
 */
const byAge = (a: ClaimCandidate, b: ClaimCandidate) => a.availableAt - b.availableAt

/** The candidates each workflow's room lets start, oldest first, and whether its room left any out. */
function withinRoom(candidates: readonly ClaimCandidate[], facts: ClaimFacts): { startable: ClaimCandidate[]; heldBack: ClaimCandidate[] } {
  const unique = [...new Map(candidates.map((run) => [run.id, run])).values()].sort(byAge)
  const taken = new Map<number, number>()
  const startable: ClaimCandidate[] = []
  const heldBack: ClaimCandidate[] = []
  for (const run of unique) {
    const count = taken.get(run.workflowId) ?? 0
    if (count >= roomOf(run, facts)) heldBack.push(run)
    else {
      taken.set(run.workflowId, count + 1)
      startable.push(run)
    }
  }
  return { startable, heldBack }
}

/**
 * The environments among whose oldest due runs a workflow's limit holds one back: the claim also reads the oldest due
 * runs of each of their workflows that has room, so runs behind held-back ones still start — without walking past a
 * held-back backlog however long it is.
 */
export function environmentsToWiden(tops: readonly ClaimCandidate[], facts: ClaimFacts): number[] {
  return [...new Set(withinRoom(tops, facts).heldBack.map((run) => run.environmentId))]
}

/**
 * Given the oldest due run of each workflow of an environment to widen (`heads`), the workflows whose further due runs
 * a claim of `free` workers must read too: the `free` oldest among those with room. A workflow whose oldest due run
 * has `free` older ones ahead of it in other workflows holds none of the environment's `free` oldest startable runs.
 */
export function workflowsToReadFurther(heads: readonly ClaimCandidate[], facts: ClaimFacts, free: number): number[] {
  return withinRoom(heads, facts).startable.slice(0, Math.max(0, free)).map((head) => head.workflowId)
}

/**
 * Every candidate a claim may start, in the order the workers are handed out (the rules above): a claim starts the
 * first ones it can, as many as it has free workers.
 */
export function claimOrder(candidates: readonly ClaimCandidate[], facts: ClaimFacts): string[] {
  const { startable } = withinRoom(candidates, facts)
  // A project's k-th run gets the worker that brings it to (workers it holds) + k: hand them out in that order.
  const held = new Map<number, number>()
  for (const run of facts.running) if (run.mine) held.set(run.projectId, (held.get(run.projectId) ?? 0) + 1)
  const nth = new Map<number, number>()
  const turns = startable.map((run) => {
    const k = (nth.get(run.projectId) ?? 0) + 1
    nth.set(run.projectId, k)
    return { run, turn: (held.get(run.projectId) ?? 0) + k }
  })
  turns.sort((a, b) => a.turn - b.turn || byAge(a.run, b.run))
  return turns.filter(({ turn }) => turn <= facts.projectCap).map(({ run }) => run.id)
}

/** The most workers a project is given while other projects' runs are due: ceil(C / N), at least 1. */
export function fairShare(concurrency: number, projectsWithDueRuns: number): number {
  return Math.max(1, Math.ceil(concurrency / Math.max(1, projectsWithDueRuns)))
}

/** Due runs by project and workflow, with the workflow's limit: what /metrics reads at scrape time. */
export interface DueRuns {
  workflowId: number
  projectId: number
  concurrencyLimit: number | null
  count: number
}

/**
 * Due runs held back now (the /metrics gauge `trellis_executor_deferred_runs`): `workflowLimit`, those beyond the room
 * their workflow's limit leaves (its runs running count on every instance); `fairShare`, the other due runs of the
 * projects that hold their fair share or more of this instance's C workers while another project has a due run it may
 * start (they get this instance's next workers only after that project's), or that hold their `projectCap`.
 */
export function deferredRuns(
  due: readonly DueRuns[],
  running: readonly RunningRun[],
  concurrency: number,
  projectsWithWorkflows: number,
): { workflowLimit: number; fairShare: number } {
  const facts: ClaimFacts = { running, startable: null, projectCap: projectCap(concurrency, projectsWithWorkflows) }
  let workflowLimit = 0
  const startableByProject = new Map<number, number>()
  for (const group of due) {
    const startable = Math.min(group.count, roomOf(group, facts))
    workflowLimit += group.count - startable
    if (startable > 0) startableByProject.set(group.projectId, (startableByProject.get(group.projectId) ?? 0) + startable)
  }
  let deferred = 0
  if (concurrency > 0) {
    const share = startableByProject.size > 1 ? fairShare(concurrency, startableByProject.size) : Infinity
    for (const [projectId, count] of startableByProject) {
      const holds = running.filter((run) => run.mine && run.projectId === projectId).length
      if (holds >= Math.min(share, facts.projectCap)) deferred += count
    }
  }
  return { workflowLimit, fairShare: deferred }
}
