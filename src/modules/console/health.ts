/**
 * Console: workflow health (project admins) — a workflow's page and an environment's, over the last day or the last
 * week (plain links switch them): the figures, a stacked bar chart of runs per status drawn as inline SVG on the
 * server (its title and description say what it shows; the same counts are in a table beside it), the slowest and
 * most failing steps, the open tasks that have waited longest. The same figures as the API's health routes, read by
 * the same service.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, scrollingTable } from '../../console/html.ts'
import { layout } from '../../console/page.ts'
import { read } from '../../db/read.ts'
import { RUN_STATUSES, type RunStatus } from '../../lib/run-statuses.ts'
import { parseHealthWindow } from '../workflow-health/query.ts'
import { type EnvironmentHealthView, environmentHealth, type HealthFigures, type HealthStep, HEALTH_WINDOW_NAMES, type HealthWindow, workflowHealth } from '../workflow-health/service.ts'
import { requireWorkflow } from '../workflows/service.ts'
import { adminEnvironment, adminProject } from './access.ts'
import { consolePage, projectPath, renderingPath, when } from './page.ts'
import { elapsed } from './runs.ts'
import { taskPath } from './tasks.ts'


const WINDOW_LABELS: Record<HealthWindow, string> = { day: 'Last day', week: 'Last week' }
/** The chart stacks the statuses from the bottom in this order: the finished ones first. */
const STACKED: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled', 'running', 'waiting', 'queued']

/** A wait as long as days: `elapsed` under an hour, then hours and minutes, then days and hours. */
export function waited(ms: number): string {
  if (ms < 3_600_000) return elapsed(ms)
  const minutes = Math.floor(ms / 60_000)
  if (minutes < 24 * 60) return `${Math.floor(minutes / 60)} h ${minutes % 60} min`
  return `${Math.floor(minutes / (24 * 60))} d ${Math.floor((minutes % (24 * 60)) / 60)} h`
}

const percent = (rate: number | null) => (rate === null ? '—' : `${(rate * 100).toFixed(1)} %`)
const millis = (ms: number | null) => (ms === null ? '—' : elapsed(ms))

/** Day and week as links to this page (the current one marked). */
function windowSwitch(url: URL, current: HealthWindow): Html {
  return html`<nav class="window-switch" aria-label="Window">${HEALTH_WINDOW_NAMES.map((window, i) => {
    const link = new URL(url)
    link.searchParams.set('window', window)
    return html`${i > 0 ? ' · ' : ''}<a href="${link.pathname + link.search}"${window === current ? html` aria-current="page"` : ''}>${WINDOW_LABELS[window]}</a>`
  })}</nav>`
}

/** The headline figures, each with `data-figure` naming it. */
function figuresList(figures: HealthFigures): Html {
  const item = (name: string, label: string, value: string | number) => html`<div><dt>${label}</dt><dd data-figure="${name}">${value}</dd></div>`
  return html`<dl class="health-figures">
${item('total', 'Runs', figures.total)}
${item('failed', 'Failed', figures.counts.failed)}
${item('failure-rate', 'Failure rate', percent(figures.failureRate))}
${item('p50', 'Median duration', millis(figures.duration.p50Ms))}
${item('p95', '95th percentile', millis(figures.duration.p95Ms))}
${item('open-tasks', 'Open tasks', figures.openTasks.count)}
${item('oldest-wait', 'Longest wait', figures.openTasks.oldestWaitMs === null ? '—' : waited(figures.openTasks.oldestWaitMs))}
</dl>`
}

/** Runs per status over the whole window, in a table (`data-status` on each count). */
function statusTable(figures: HealthFigures): Html {
  return scrollingTable(html`<table class="health-statuses"><caption>Runs per status</caption><thead><tr><th scope="col">Status</th><th scope="col">Runs</th></tr></thead><tbody>
${RUN_STATUSES.map((status) => html`<tr><th scope="row"><span class="swatch bar-${status}"></span> ${status}</th><td data-status="${status}">${figures.counts[status]}</td></tr>`)}
<tr><th scope="row">total</th><td data-status="total">${figures.total}</td></tr>
</tbody></table>`)
}

/** The chart's drawing units: it scales to the page's width, and its labels with it (readable at 390 px and at 36rem). */
const CHART = { width: 480, height: 200, left: 34, right: 6, top: 10, bottom: 24 }

/** "18 h ago", "now": the chart's time axis, counted back from the read. */
function axisLabel(window: HealthWindow, bucketsBack: number): string {
  if (bucketsBack === 0) return 'now'
  return window === 'day' ? `${bucketsBack} h ago` : `${bucketsBack} d ago`
}

/** The stacked bar chart of runs per status per bucket, as inline SVG with its title and description. */
function runsChart(figures: HealthFigures, id: string): Html {
  const { width, height, left, right, top, bottom } = CHART
  const plotWidth = width - left - right
  const plotHeight = height - top - bottom
  const count = figures.buckets.length
  const highest = Math.max(1, ...figures.buckets.map((bucket) => bucket.total))
  const slot = plotWidth / count
  const barWidth = Math.max(1, slot * 0.8)
  const y = (value: number) => top + plotHeight - (value / highest) * plotHeight
  const unit = figures.window === 'day' ? 'hour' : 'day'
  const busiest = figures.buckets.reduce((best, bucket) => (bucket.total > best.total ? bucket : best), figures.buckets[0]!)
  const description =
    figures.total === 0
      ? `No run was created in the ${WINDOW_LABELS[figures.window].toLowerCase()}.`
      : `${figures.total} runs over ${count} ${unit}s: ${RUN_STATUSES.filter((status) => figures.counts[status] > 0)
          .map((status) => `${figures.counts[status]} ${status}`)
          .join(', ')}. The busiest ${unit} (from ${busiest.from.slice(0, 16).replace('T', ' ')} UTC) had ${busiest.total}. The table below lists every ${unit}.`
  const bars = figures.buckets.map((bucket, i) => {
    let base = 0
    const x = left + i * slot + (slot - barWidth) / 2
    return STACKED.filter((status) => bucket.counts[status] > 0).map((status) => {
      const value = bucket.counts[status]
      const rect = html`<rect class="bar-${status}" x="${x.toFixed(1)}" y="${y(base + value).toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(y(base) - y(base + value)).toFixed(1)}"><title>${bucket.from.slice(0, 16).replace('T', ' ')} UTC: ${value} ${status}</title></rect>`
      base += value
      return rect
    })
  })
  const ticks = [0, Math.round(highest / 2), highest].filter((value, i, all) => all.indexOf(value) === i)
  const step = figures.window === 'day' ? 6 : 1
  const marks = Array.from({ length: Math.floor(count / step) + 1 }, (_, k) => k * step)
  return html`<figure class="health-chart">
<svg viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="${id}-title ${id}-desc" focusable="false">
<title id="${id}-title">Runs per ${unit} and status, ${WINDOW_LABELS[figures.window].toLowerCase()}</title>
<desc id="${id}-desc">${description}</desc>
${ticks.map((value) => html`<line class="grid" x1="${left}" x2="${width - right}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}"></line><text class="axis" x="${left - 6}" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${value}</text>`)}
${bars}
${marks.map((k) => html`<text class="axis" x="${(left + k * slot).toFixed(1)}" y="${height - 6}" text-anchor="${k === 0 ? 'start' : k === count ? 'end' : 'middle'}">${axisLabel(figures.window, count - k)}</text>`)}
</svg>
<figcaption><ul class="legend">${STACKED.map((status) => html`<li><span class="swatch bar-${status}"></span> ${status}</li>`)}</ul></figcaption>
</figure>
<details class="chart-data"><summary>The chart's counts, ${unit} by ${unit}</summary>
${scrollingTable(html`<table class="health-buckets"><thead><tr><th scope="col">From (UTC)</th>${RUN_STATUSES.map((status) => html`<th scope="col">${status}</th>`)}<th scope="col">Total</th></tr></thead><tbody>
${figures.buckets.map((bucket) => html`<tr><td>${when(bucket.from)}</td>${RUN_STATUSES.map((status) => html`<td>${bucket.counts[status]}</td>`)}<td>${bucket.total}</td></tr>`)}
</tbody></table>`)}
</details>`
}

/** A table of steps; `workflows`: with the workflow's name (an environment's page). */
function stepsTable(caption: string, steps: HealthStep[], workflows: boolean, empty: string, className: string): Html {
  if (steps.length === 0) return html`<h3>${caption}</h3><p class="muted">${empty}</p>`
  return html`<h3>${caption}</h3>${scrollingTable(html`<table class="${className}"><thead><tr>${workflows ? html`<th scope="col">Workflow</th>` : ''}<th scope="col">Step</th><th scope="col">Ran</th><th scope="col">Failed</th><th scope="col">Mean</th><th scope="col">Longest</th></tr></thead><tbody>
${steps.map((step) => html`<tr>${workflows ? html`<td>${step.workflowName} <span class="muted">· ${step.teamName}</span></td>` : ''}<td>${step.stepName}</td><td>${step.count}</td><td>${step.failures}</td><td>${elapsed(step.meanMs)}</td><td>${elapsed(step.maxMs)}</td></tr>`)}
</tbody></table>`)}`
}

/** The open tasks that have waited longest, each a link to its page. */
function openTasksSection(figures: HealthFigures, workflows: boolean): Html {
  const { count, longestWaiting } = figures.openTasks
  if (count === 0) return html`<h2>Open tasks</h2><p class="muted">No task is open.</p>`
  return html`<h2>Open tasks</h2><p>${count} open${count > longestWaiting.length ? html`; the ${longestWaiting.length} that have waited longest:` : ':'}</p>
${scrollingTable(html`<table class="health-tasks"><thead><tr><th scope="col">Task</th>${workflows ? html`<th scope="col">Workflow</th>` : ''}<th scope="col">Step</th><th scope="col">Opened (UTC)</th><th scope="col">Waiting</th></tr></thead><tbody>
${longestWaiting.map((task) => html`<tr><td><a href="${taskPath(task.id)}">${task.title}</a></td>${workflows ? html`<td>${task.workflowName} <span class="muted">· ${task.teamName}</span></td>` : ''}<td>${task.stepName}</td><td>${when(task.createdAt)}</td><td>${waited(task.waitMs)}</td></tr>`)}
</tbody></table>`)}`
}

/** Everything a health page shows but the per-workflow rows. */
function healthBody(url: URL, figures: HealthFigures, workflows: boolean, rows: Html | string = ''): Html {
  return html`${windowSwitch(url, figures.window)}
<p class="muted">Runs created from ${when(figures.from)} to ${when(figures.to)} UTC; open tasks as of now.</p>
${figuresList(figures)}
<h2>Runs</h2>
${runsChart(figures, 'runs-chart')}
${statusTable(figures)}
${rows}
<h2>Steps</h2>
${stepsTable('Slowest steps (by mean duration)', figures.slowestSteps, workflows, 'No step ran in this window.', 'health-slowest')}
${stepsTable('Most failing steps', figures.failingSteps, workflows, 'No step failed in this window.', 'health-failing')}
${openTasksSection(figures, workflows)}`
}

/** The environment page's row per workflow, each linking to its own health page. */
function workflowRows(project: string, environment: string, health: EnvironmentHealthView): Html {
  return html`<h2>Workflows</h2>${scrollingTable(html`<table class="health-workflows"><thead><tr><th scope="col">Workflow</th><th scope="col">Team</th><th scope="col">Runs</th><th scope="col">Failed</th><th scope="col">Failure rate</th><th scope="col">Open tasks</th></tr></thead><tbody>
${health.workflows.map((row) => html`<tr><td><a href="${renderingPath(project, environment, row.teamName, 'w', row.workflowName, 'health')}?window=${health.window}">${row.workflowName}</a></td><td>${row.teamName}</td><td>${row.total}</td><td>${row.counts.failed}</td><td>${percent(row.failureRate)}</td><td>${row.openTasks}</td></tr>`)}
</tbody></table>`)}`
}

export function healthPages(deps: AppDeps) {
  return new Elysia({ name: 'console-health', detail: { hide: true } })
    .get(
      '/p/:project/e/:environment/t/:team/w/:workflow/health',
      consolePage(deps, async ({ user, params, query, url }) => {
        const { project, health } = await read(
          deps.store,
          (function* () {
            const project = yield* adminProject(user, params.project!)
            const target = yield* requireWorkflow(project.id, params.environment!, params.team!, params.workflow!)
            return { project, health: yield* workflowHealth(target, params.team!, parseHealthWindow(query), deps.clock.now()) }
          })(),
        )
        return layout({
          title: `Health: ${health.workflowName}`,
          user,
          crumbs: [
            { label: 'Projects', href: '/' },
            { label: project.name, href: projectPath(project.name) },
            { label: `${params.environment} · ${params.team}`, href: renderingPath(project.name, params.environment!, params.team!) },
            { label: health.workflowName, href: renderingPath(project.name, params.environment!, params.team!, 'w', health.workflowName) },
          ],
          body: healthBody(url, health, false),
        })
      }),
    )
    .get(
      '/p/:project/e/:environment/health',
      consolePage(deps, async ({ user, params, query, url }) => {
        const { project, health } = await read(
          deps.store,
          (function* () {
            const { project, environment } = yield* adminEnvironment(user, params.project!, params.environment!)
            return { project, health: yield* environmentHealth(environment, parseHealthWindow(query), deps.clock.now()) }
          })(),
        )
        return layout({
          title: `Health: ${health.environmentName}`,
          user,
          crumbs: [
            { label: 'Projects', href: '/' },
            { label: project.name, href: projectPath(project.name) },
          ],
          body: healthBody(url, health, true, workflowRows(project.name, health.environmentName, health)),
        })
      }),
    )
}
