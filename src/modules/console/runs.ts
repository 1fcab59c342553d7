/**
 * Console: an environment's runs (project admins) and one run's detail with its steps and its completion callbacks'
 * deliveries, each with its attempts and a Resend button (its user, or an admin).
 */
import { Elysia } from 'elysia'
import type { Answer } from '../../db/op.ts'
import type { AppDeps } from '../../deps.ts'
import { ACTIVE_RUN_STATUSES, isRetryableStatus, RUN_STATUSES } from '../../lib/run-statuses.ts'
import { html, type Html, path, scrollingTable } from '../../console/html.ts'
import { page, parseEnumParameter, parseStringParameter } from '../../http/list.ts'
import { listRunIds, renderRuns, visibleRun } from '../runs/service.ts'
import { renderRunCallbacks } from '../callbacks/service.ts'
import { isAdminOf } from '../directory/projects.ts'
import { adminEnvironment, asCaller } from './access.ts'
import { layout } from '../../console/page.ts'
import { consolePage, projectPath, renderingPath, when } from './page.ts'
import { collectionPath, placeCrumbs, recordLink, recordPath, runLink, runPath, type WorkflowPlace, withAllowListLink, workflowPlaces } from './links.ts'
import { stepLabel } from '../workflows/definition.ts'
import { versionSteps } from '../workflows/service.ts'
import { read, readListed } from '../../db/read.ts'
import { loadTasksToRender, openTaskOfRun } from '../../db/tasks.ts'
import { runOrigin } from './workflow-events.ts'

const PER_PAGE = 50

type RunView = Answer<ReturnType<typeof renderRuns>>[number]
type Places = Map<number, WorkflowPlace>

const status = (s: string) => html`<span class="status-${s.replace(' ', '-')}">${s}</span>`

/** A run its viewer may retry (src/modules/runs/retry.ts): it failed or was cancelled, and no run retries it yet. */
const retryable = (run: RunView) => isRetryableStatus(run.status) && run.retriedBy === null
const isActive = (s: string) => (ACTIVE_RUN_STATUSES as readonly string[]).includes(s)

/** How long from `from` to `to` (ISO times), as live.js writes it too: `350 ms`, `4.2 s`, `3 min 5 s`. */
export function duration(from: string | null | undefined, to: string | null | undefined): string {
  if (!from || !to) return ''
  return elapsed(Math.max(0, Date.parse(to) - Date.parse(from)))
}

/** A number of milliseconds as `duration` writes it. */
export function elapsed(ms: number): string {
  if (ms < 1_000) return `${ms} ms`
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`
}

/** A waiting step's end, as live.js writes it: `until 10:42:05` (UTC). */
const waitingUntil = (output: unknown) => {
  const until = (output as { until?: unknown } | undefined)?.until
  return typeof until === 'string' ? `until ${until.slice(11, 19)}` : ''
}

/**
 * A list of runs, each row with its run and record linked. With `live` (an environment's run-events URL), live.js
 * updates each row's status and puts new runs on top; `places` (the runs' workflows) gives it each workflow's
 * records' address.
 */
export function runsTable(runs: RunView[], places: Places = new Map(), live?: string): Html {
  const bases = Object.fromEntries([...places].map(([id, place]) => [id, recordPath(place, '')]))
  const liveAttributes = live ? html` data-live-runs="${live}" data-record-bases="${JSON.stringify(bases)}"` : ''
  return html`${scrollingTable(html`<table class="runs"${liveAttributes}${runs.length === 0 ? html` hidden` : ''}><thead><tr><th>Run</th><th>Started (UTC)</th><th>Workflow</th><th>Record</th><th>Status</th><th>Trigger</th><th>User</th></tr></thead><tbody>
${runs.map(
  (r) => html`<tr data-run-id="${r.id}"><td>${runLink(r.id)}</td><td>${when(r.createdAt)}</td><td>${r.workflow.name} <span class="muted">v${r.workflow.version} · ${r.team.name}</span></td><td>${recordLink(places.get(r.workflow.id), r.recordId)}</td><td class="run-status">${status(r.status)}</td><td>${r.trigger}</td><td>${r.user.email}</td></tr>`,
)}
</tbody></table>`)}${runs.length === 0 ? html`<p class="muted no-runs">No runs.</p>` : ''}`
}

/** The run-events URL of an environment's runs (one record's, with `recordId`) for a live list. */
export function environmentEventsPath(project: string, environment: string, recordId?: string): string {
  const base = `${path('v1', 'project', project, 'environment', environment, 'workflow-runs', 'events')}`
  return recordId === undefined ? base : `${base}?recordId=${encodeURIComponent(recordId)}`
}

/** Every step of the run's version, in order: those recorded with their state and times, the others `pending` (`not run` once the run ended). */
function stepsTable(run: RunView, planned: { type: string; name?: string }[]): Html {
  const recorded = new Map(run.steps.map((s) => [s.index, s]))
  const count = Math.max(planned.length, ...run.steps.map((s) => s.index + 1))
  const rows = Array.from({ length: count }, (_, index) => {
    const s = recorded.get(index)
    const plan = planned[index]
    if (!s) {
      return html`<tr data-step="${index}"><td>${index + 1}</td><td>${plan ? stepLabel(plan, index) : ''}</td><td>${plan?.type ?? ''}</td><td class="step-status">${status(isActive(run.status) ? 'pending' : 'not run')}</td><td class="step-started">${when(null)}</td><td class="step-finished">${when(null)}</td><td class="step-duration"></td><td class="step-output"></td></tr>`
    }
    return html`<tr data-step="${index}"><td>${index + 1}</td><td>${s.name}</td><td>${s.type}</td><td class="step-status">${status(s.status)}${s.carriedFrom ? html` <span class="muted">carried from the retried run</span>` : ''}</td><td class="step-started">${when(s.startedAt)}</td><td class="step-finished">${when(s.finishedAt)}</td><td class="step-duration">${s.status === 'waiting' ? waitingUntil(s.output) : duration(s.startedAt, s.finishedAt)}</td><td class="step-output"><code>${JSON.stringify(s.error ?? s.output ?? null)}</code></td></tr>`
  })
  return scrollingTable(html`<table class="steps"><thead><tr><th>#</th><th>Step</th><th>Type</th><th>Status</th><th>Started (UTC)</th><th>Finished (UTC)</th><th>Duration</th><th>Output / error</th></tr></thead><tbody>
${rows}
</tbody></table>`)
}

export function runPages(deps: AppDeps) {
  return new Elysia({ name: 'console-runs', detail: { hide: true } })
    .get(
      '/p/:project/e/:environment/runs',
      consolePage(deps, async ({ user, params, query, url }) => {
        const filters = {
          status: parseEnumParameter(query, 'status', RUN_STATUSES),
          recordId: parseStringParameter(query, 'recordId'),
          beforeId: parseStringParameter(query, 'before', 64),
        }
        const { project, environment } = await read(deps.store, adminEnvironment(user, params.project!, params.environment!))
        const result = await page(await readListed(deps.store, 'runs', listRunIds(environment.id, filters, [], PER_PAGE)), PER_PAGE, (ids) => read(deps.store, renderRuns(ids, deps.clock.now())), {})
        const places = await read(deps.store, workflowPlaces({ environmentId: environment.id }))
        const older = new URL(url)
        older.searchParams.set('before', result.data.at(-1)?.id ?? '')
        // The first page without filters follows the environment's runs; a filtered or older page stays as it is.
        const live = filters.status === undefined && filters.beforeId === undefined ? environmentEventsPath(project.name, environment.name, filters.recordId) : undefined
        return layout({
          title: `Runs · ${environment.name}`,
          user,
          crumbs: [...placeCrumbs({ project: project.name }), { label: environment.name }],
          body: html`<form method="get" class="filters"><label class="check">Record <input name="recordId" value="${query.recordId ?? ''}"></label>
<label class="check">Status <select name="status"><option value="">any</option>${RUN_STATUSES.map((s) => html`<option${s === query.status ? html` selected` : ''}>${s}</option>`)}</select></label><button type="submit">Filter</button></form>
${runsTable(result.data, places, live)}${result.hasMore ? html`<p class="pager"><a href="${older.pathname + older.search}">Older →</a></p>` : ''}`,
        })
      }),
    )
    .get(
      '/runs/:runId',
      consolePage(deps, async ({ user, params }) => {
        const found = await read(deps.store, visibleRun(asCaller(user), params.runId!))
        const isAdmin = await read(deps.store, isAdminOf(user.id, found.projectId))
        const run = (await read(deps.store, renderRuns([found.run.id], deps.clock.now())))[0]!
        const deliveries = await read(deps.store, renderRunCallbacks(run.id))
        const planned = await read(deps.store, versionSteps(found.run.workflowVersionId))
        const place = (await read(deps.store, workflowPlaces([run.workflow.id]))).get(run.workflow.id)!
        const [openTask] = await read(deps.store, loadTasksToRender(await read(deps.store, openTaskOfRun(run.id))))
        const rendering = renderingPath(place.project, place.environment, place.team)
        const workflowHref = isAdmin ? renderingPath(place.project, place.environment, place.team, 'w', run.workflow.name) : `${rendering}#workflows`
        const live = isActive(run.status) ? html` data-live-run="${path('v1', 'workflow-runs', run.id)}"` : ''
        return layout({
          title: `Run of ${run.workflow.name}`,
          user,
          crumbs: placeCrumbs({ ...place, record: run.recordId }, { label: `run ${run.id.slice(0, 8)}` }),
          body: html`<div id="run"${live}>${scrollingTable(html`<table class="run-facts"><tbody>
<tr><th>Status</th><td id="run-status">${status(run.status)}</td></tr>
<tr><th>Record</th><td>${recordLink(place, run.recordId)} <span class="muted">in</span> <a href="${collectionPath(place)}">${place.collection}</a></td></tr>
<tr><th>Workflow</th><td><a id="run-workflow" href="${workflowHref}">${run.workflow.name}</a> v${run.workflow.version}</td></tr>
<tr><th>Project</th><td><a id="run-project" href="${projectPath(place.project)}">${place.project}</a> · <a id="run-environment" href="${rendering}">${run.environment.name} · ${run.team.name}</a>${isAdmin ? html` · <a href="${projectPath(place.project, 'e', place.environment, 'runs')}">all runs</a>` : ''}</td></tr>
<tr><th>Started by</th><td id="run-origin">${runOrigin(run, place)}</td></tr>
<tr><th>Created / started / finished</th><td><span id="run-created">${when(run.createdAt)}</span> / <span id="run-started">${when(run.startedAt)}</span> / <span id="run-finished">${when(run.finishedAt)}</span></td></tr>
<tr id="run-error"${run.error ? '' : html` hidden`}><th>Error</th><td class="error">${run.error ? html`<code>${run.error.code}</code> ${withAllowListLink(run.error.message)}` : ''}</td></tr>
</tbody><tbody id="run-waiting" data-refresh>${openTask ? html`<tr id="run-task"><th>Waiting for</th><td><a class="task-link" href="${path('tasks', openTask.id)}">${openTask.title}</a> <span class="muted">(task “${openTask.step}”, ${openTask.decisions.filter((d) => d.decision === 'approve').length} of ${openTask.approvalsRequired} approvals)</span></td></tr>` : ''}</tbody><tbody>
${run.retryOf ? html`<tr><th>Retry of</th><td><a class="mono" href="${runPath(run.retryOf)}">${run.retryOf}</a> <span class="muted">(resumed at the step it stopped at)</span></td></tr>` : ''}
${run.retriedBy ? html`<tr><th>Retried by</th><td><a class="mono" href="${runPath(run.retriedBy)}">${run.retriedBy}</a></td></tr>` : ''}
</tbody></table>`)}
${isActive(run.status) ? html`<form id="run-cancel" data-api action="/v1/workflow-runs/${run.id}/cancel" data-confirm="Cancel this run?" data-done="Run cancelled."><button type="submit" class="danger">Cancel run</button> <span class="form-error" role="alert"></span></form>` : ''}
${retryable(run) ? html`<form data-api action="/v1/workflow-runs/${run.id}/retry" id="run-retry" data-confirm="Retry this run from the step it stopped at?" data-next="/runs/{runId}" data-done="Retry started."><button type="submit">Retry run</button> <span class="form-error" role="alert"></span></form>` : ''}
<h2>Steps</h2>
${stepsTable(run, planned)}
<p id="run-live" class="muted" hidden></p></div>
${deliveriesSection(run.id, deliveries)}`,
        })
      }),
    )
}

/**
 * A run's callback deliveries: endpoint, event, state, every attempt; Resend for one no longer pending. The region is
 * there, empty, for a run without any: live.js reads it again when the run ends, and its callbacks appear.
 */
function deliveriesSection(runId: string, deliveries: Answer<ReturnType<typeof renderRunCallbacks>>): Html {
  return html`<div id="run-callbacks" data-refresh>${deliveries.length === 0 ? '' : deliveriesTable(runId, deliveries)}</div>`
}

function deliveriesTable(runId: string, deliveries: Answer<ReturnType<typeof renderRunCallbacks>>): Html {
  const attempt = (a: (typeof deliveries)[number]['attempts'][number]) =>
    html`<li>#${a.attempt} ${when(a.startedAt)} · ${a.statusCode === null ? html`<span class="error">${withAllowListLink(a.error ?? '')}</span>` : html`<code>${a.statusCode}</code>`} · ${a.durationMs} ms</li>`
  return html`<h2>Callbacks</h2>
${scrollingTable(html`<table class="deliveries"><thead><tr><th>Endpoint</th><th>Event</th><th>Status</th><th>Attempts</th><th>Actions</th></tr></thead><tbody>
${deliveries.map(
  (d) => html`<tr><td class="mono">${d.endpoint.url}<br><span class="muted">webhook-id ${d.id}</span></td><td>${d.type}</td><td>${status(d.status)}${d.nextAttemptAt ? html` <span class="muted">next ${when(d.nextAttemptAt)}</span>` : ''}</td><td>${d.attempts.length === 0 ? html`<span class="muted">none yet</span>` : html`<ol class="attempts">${d.attempts.map(attempt)}</ol>`}</td><td>${d.status === 'pending' ? '' : html`<form class="inline" data-api action="/v1/workflow-runs/${runId}/callbacks/${d.id}/resend" data-confirm="Send this callback again (same webhook-id)?" data-done="Callback queued to be sent again."><button type="submit">Resend</button> <span class="form-error" role="alert"></span></form>`}</td></tr>`,
)}
</tbody></table>`, { rowActions: true })}`
}
