/**
 * Console: an environment's runs (project admins) and one run's detail with its steps and its completion callbacks'
 * deliveries, each with its attempts and a Resend button (its user, or an admin).
 */
import { Elysia } from 'elysia'
import type { Answer } from '../../db/op.ts'
import type { AppDeps } from '../../deps.ts'
import { ACTIVE_RUN_STATUSES, isRetryableStatus, RUN_STATUSES } from '../../lib/run-statuses.ts'
import { html, type Html, scrollingTable } from '../../console/html.ts'
import { notFound } from '../../lib/errors.ts'
import { page, parseEnumParameter, parseStringParameter } from '../../http/list.ts'
import { findRun, listRunIds, renderRuns } from '../runs/service.ts'
import { renderRunCallbacks } from '../callbacks/service.ts'
import { isAdminOf } from '../directory/projects.ts'
import { adminEnvironment } from './access.ts'
import { layout } from '../../console/page.ts'
import { consolePage, projectPath, when } from './page.ts'
import { read } from '../../db/read.ts'

const PER_PAGE = 50

type RunView = Answer<ReturnType<typeof renderRuns>>[number]

const status = (s: string) => html`<span class="status-${s}">${s}</span>`

/** A run its viewer may retry (src/modules/runs/retry.ts): it failed or was cancelled, and no run retries it yet. */
const retryable = (run: RunView) => isRetryableStatus(run.status) && run.retriedBy === null

export function runsTable(runs: RunView[]): Html {
  if (runs.length === 0) return html`<p class="muted">No runs.</p>`
  return scrollingTable(html`<table class="runs"><thead><tr><th>Started (UTC)</th><th>Workflow</th><th>Record</th><th>Status</th><th>Trigger</th><th>User</th></tr></thead><tbody>
${runs.map(
  (r) => html`<tr><td><a href="/runs/${r.id}">${when(r.createdAt)}</a></td><td>${r.workflow.name} <span class="muted">v${r.workflow.version} · ${r.team.name}</span></td><td class="mono">${r.recordId}</td><td>${status(r.status)}</td><td>${r.trigger}</td><td>${r.user.email}</td></tr>`,
)}
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
        const result = await page(await read(deps.store, listRunIds(environment.id, filters, [], PER_PAGE)), PER_PAGE, (ids) => read(deps.store, renderRuns(ids, deps.clock.now())), {})
        const older = new URL(url)
        older.searchParams.set('before', result.data.at(-1)?.id ?? '')
        return layout({
          title: `Runs · ${environment.name}`,
          user,
          crumbs: [{ label: 'Projects', href: '/' }, { label: project.name, href: projectPath(project.name) }],
          body: html`<form method="get" class="filters"><label class="check">Record <input name="recordId" value="${query.recordId ?? ''}"></label>
<label class="check">Status <select name="status"><option value="">any</option>${RUN_STATUSES.map((s) => html`<option${s === query.status ? html` selected` : ''}>${s}</option>`)}</select></label><button type="submit">Filter</button></form>
${runsTable(result.data)}${result.hasMore ? html`<p class="pager"><a href="${older.pathname + older.search}">Older →</a></p>` : ''}`,
        })
      }),
    )
    .get(
      '/runs/:runId',
      consolePage(deps, async ({ user, params }) => {
        const found = await read(deps.store, findRun(params.runId!))
        if (!found || (found.run.userId !== user.id && !(await read(deps.store, isAdminOf(user.id, found.projectId))))) throw notFound(`Run ${params.runId} not found`)
        const run = (await read(deps.store, renderRuns([found.run.id], deps.clock.now())))[0]!
        const deliveries = await read(deps.store, renderRunCallbacks(run.id))
        return layout({
          title: `Run of ${run.workflow.name}`,
          user,
          crumbs: [{ label: 'Projects', href: '/' }],
          body: html`${scrollingTable(html`<table><tbody>
<tr><th>Status</th><td id="run-status">${status(run.status)}</td></tr>
<tr><th>Workflow</th><td>${run.workflow.name} v${run.workflow.version} (${run.environment.name} · ${run.team.name})</td></tr>
<tr><th>Record</th><td class="mono">${run.recordId}</td></tr>
<tr><th>Triggered</th><td>${run.trigger} by ${run.user.email}${run.token ? html` through token “${run.token.name}” (<code>${run.token.prefix}…</code>)` : ''}</td></tr>
<tr><th>Created / started / finished</th><td>${when(run.createdAt)} / ${when(run.startedAt)} / ${when(run.finishedAt)}</td></tr>
${run.error ? html`<tr><th>Error</th><td class="error"><code>${run.error.code}</code> ${run.error.message}</td></tr>` : ''}
${run.retryOf ? html`<tr><th>Retry of</th><td><a class="mono" href="/runs/${run.retryOf}">${run.retryOf}</a> <span class="muted">(resumed at the step it stopped at)</span></td></tr>` : ''}
${run.retriedBy ? html`<tr><th>Retried by</th><td><a class="mono" href="/runs/${run.retriedBy}">${run.retriedBy}</a></td></tr>` : ''}
</tbody></table>`)}
${(ACTIVE_RUN_STATUSES as readonly string[]).includes(run.status) ? html`<form data-api action="/v1/workflow-runs/${run.id}/cancel" data-confirm="Cancel this run?" data-done="Run cancelled."><button type="submit" class="danger">Cancel run</button> <span class="form-error" role="alert"></span></form>` : ''}
${retryable(run) ? html`<form data-api action="/v1/workflow-runs/${run.id}/retry" data-confirm="Retry this run from the step it stopped at?" data-next="/runs/{runId}" data-done="Retry started."><button type="submit">Retry run</button> <span class="form-error" role="alert"></span></form>` : ''}
<h2>Steps</h2>
${
  run.steps.length === 0
    ? html`<p class="muted">No step has finished yet.</p>`
    : scrollingTable(html`<table class="steps"><thead><tr><th>#</th><th>Step</th><th>Type</th><th>Status</th><th>Finished (UTC)</th><th>Output / error</th></tr></thead><tbody>
${run.steps.map((s) => html`<tr><td>${s.index + 1}</td><td>${s.name}</td><td>${s.type}</td><td>${status(s.status)}${s.carriedFrom ? html` <span class="muted">carried from the retried run</span>` : ''}</td><td>${when(s.finishedAt)}</td><td><code>${JSON.stringify(s.error ?? s.output ?? null)}</code></td></tr>`)}
</tbody></table>`)
}
${deliveriesSection(run.id, deliveries)}`,
        })
      }),
    )
}

/** A run's callback deliveries: endpoint, event, state, every attempt; Resend for one no longer pending. */
function deliveriesSection(runId: string, deliveries: Answer<ReturnType<typeof renderRunCallbacks>>): Html | string {
  if (deliveries.length === 0) return ''
  const attempt = (a: (typeof deliveries)[number]['attempts'][number]) =>
    html`<li>#${a.attempt} ${when(a.startedAt)} · ${a.statusCode === null ? html`<span class="error">${a.error}</span>` : html`<code>${a.statusCode}</code>`} · ${a.durationMs} ms</li>`
  return html`<h2>Callbacks</h2>
${scrollingTable(html`<table class="deliveries"><thead><tr><th>Endpoint</th><th>Event</th><th>Status</th><th>Attempts</th><th>Actions</th></tr></thead><tbody>
${deliveries.map(
  (d) => html`<tr><td class="mono">${d.endpoint.url}<br><span class="muted">webhook-id ${d.id}</span></td><td>${d.type}</td><td>${status(d.status)}${d.nextAttemptAt ? html` <span class="muted">next ${when(d.nextAttemptAt)}</span>` : ''}</td><td>${d.attempts.length === 0 ? html`<span class="muted">none yet</span>` : html`<ol class="attempts">${d.attempts.map(attempt)}</ol>`}</td><td>${d.status === 'pending' ? '' : html`<form class="inline" data-api action="/v1/workflow-runs/${runId}/callbacks/${d.id}/resend" data-confirm="Send this callback again (same webhook-id)?" data-done="Callback queued to be sent again."><button type="submit">Resend</button> <span class="form-error" role="alert"></span></form>`}</td></tr>`,
)}
</tbody></table>`)}`
}
