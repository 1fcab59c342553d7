/**
 * Console: a workflow's page (project admins) — its steps, the editor, a test run, recent runs and versions
 * (./workflow-authoring.ts), its trigger settings — enable or pause the webhook, copy its URL, regenerate it (after a
 * confirmation), set its rate — and its completion callbacks: listed, added (the signing secret shown once), removed;
 * a link to its health page (./health.ts).
 * The forms call the workflows, runs, webhook settings and callbacks APIs with the session.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, scrollingTable } from '../../console/html.ts'
import { CALLBACK_EVENTS, CALLBACK_URL_MAX_LENGTH, RUN_CALLBACK_EVENTS } from '../../lib/callbacks.ts'
import { type CallbackEndpointView, listWorkflowCallbacks } from '../callbacks/service.ts'
import { activeDefinition, pageWorkflowVersions, renderWorkflowVersions, requireWorkflow, type WebhookSettings, webhookSettings, workflowVersion } from '../workflows/service.ts'
import { invalidParameter, parseIdParameter, type Query } from '../../http/list.ts'
import { listRunIds, renderRuns } from '../runs/service.ts'
import { collectionFields, projectCollections, projectLayout } from '../records/service.ts'
import { projectPeople } from '../directory/projects.ts'
import type { Op } from '../../db/op.ts'
import { adminProject } from './access.ts'
import { runsTable } from './runs.ts'
import { AUTHORING_ASSETS, type BuilderChoices, diffSection, editorForm, stepsList, testRunForm, versionsSection, workflowApi } from './workflow-authoring.ts'
import { layout } from '../../console/page.ts'
import { scheduleSection } from './workflow-schedule.ts'
import { consolePage, projectPath, renderingPath, when } from './page.ts'
import { read } from '../../db/read.ts'
import { workflowEventsView } from '../workflow-events/service.ts'
import { eventsSection } from './workflow-events.ts'

const VERSIONS_SHOWN = 50
const RUNS_SHOWN = 10

/** `from` and `to` of the compare form: both or neither (a 400 page names the one missing or bad). */
function comparedVersions(query: Query): { from: number; to: number } | undefined {
  const from = parseIdParameter(query, 'from')
  const to = parseIdParameter(query, 'to')
  if (from === undefined && to === undefined) return undefined
  if (from === undefined) throw invalidParameter('from', 'choose the version to compare from')
  if (to === undefined) throw invalidParameter('to', 'choose the version to compare to')
  return { from, to }
}

/** What the builder offers: each collection's fields (none: untyped), the project's teams, its members' emails. */
function* builderChoices(projectId: number): Op<BuilderChoices> {
  const collections: BuilderChoices['collections'] = []
  for (const collection of yield* projectCollections(projectId)) {
    collections.push({ name: collection.name, fields: (yield* collectionFields(collection.id, 'read')).map((f) => ({ name: f.name, type: f.type })) })
  }
  const people = yield* projectPeople(projectId)
  return { collections, teams: (yield* projectLayout(projectId)).teams.map((t) => t.name), users: people.map((p) => p.email) }
}

export function workflowPages(deps: AppDeps) {
  return new Elysia({ name: 'console-workflows', detail: { hide: true } }).get(
    '/p/:project/e/:environment/t/:team/w/:workflow',
    consolePage(deps, async ({ user, params, query }) => {
      const compared = comparedVersions(query)
      await deps.store.awaitListed('runs') // the workflow's newest runs, below
      const view = await read(
        deps.store,
        (function* () {
          const project = yield* adminProject(user, params.project!)
          const target = yield* requireWorkflow(project.id, params.environment!, params.team!, params.workflow!)
          const versions = yield* renderWorkflowVersions(target, (yield* pageWorkflowVersions(target, undefined, VERSIONS_SHOWN)).slice(0, VERSIONS_SHOWN))
          // Withdrawn (no active version): the editor starts from the newest version.
          const shown = target.activeVersionId !== null ? (yield* activeDefinition(target)) : versions[0] ? (yield* workflowVersion(target, versions[0].version)) : undefined
          const diff = compared ? { from: yield* workflowVersion(target, compared.from), to: yield* workflowVersion(target, compared.to) } : undefined
          return {
            project,
            target,
            versions,
            shown,
            diff,
            callbacks: yield* listWorkflowCallbacks(target.workflowId),
            choices: yield* builderChoices(project.id),
            events: yield* workflowEventsView(target),
            runIds: (yield* listRunIds(target.environmentId, { workflowIds: [target.workflowId] }, [], RUNS_SHOWN)).slice(0, RUNS_SHOWN),
          }
        })(),
      )
      const { project, target } = view
      const runs = await read(deps.store, renderRuns(view.runIds, deps.clock.now()))
      const place = { project: project.name, environment: params.environment!, team: params.team! }
      const name = target.workflowName
      const active = target.activeVersionId === null ? undefined : view.shown
      return layout({
        title: name,
        user,
        assets: AUTHORING_ASSETS,
        crumbs: [
          { label: 'Projects', href: '/' },
          { label: project.name, href: projectPath(project.name) },
          { label: `${params.environment} · ${params.team}`, href: renderingPath(project.name, params.environment!, params.team!) },
        ],
        // The regions marked data-refresh are fetched again after a Publish (editor.js), so the page shows the new version.
        body: html`<p id="workflow-summary" data-refresh>${
          active
            ? html`Version <strong>v${active.version}</strong> is active, on <strong>${active.definition.collection}</strong>${active.definition.concurrency ? html`, at most ${active.definition.concurrency} runs at once` : ''}.`
            : html`<span class="error">Withdrawn: no version is active, new runs cannot start.</span>`
        }</p>
<p><a id="workflow-health" href="${renderingPath(project.name, params.environment!, params.team!, 'w', name, 'health')}">Health</a>: runs per status, failure rate, durations, slowest and failing steps, open tasks.</p>
<h2>Steps</h2>
<div id="workflow-steps" data-refresh>${active ? stepsList(active.definition) : html`<p class="muted">None active.</p>`}</div>
<h2>Edit and publish</h2>
${editorForm(place, name, view.shown?.definition, view.choices)}
${active ? html`<h2>Test run</h2>${testRunForm(place, name, active.definition.collection)}` : ''}
<h2>Recent runs</h2>
${runsTable(runs)}
<h2 id="versions">Versions</h2>
<div id="workflow-versions" data-refresh>${versionsSection(view.versions, compared)}</div>
${view.diff ? diffSection(view.diff.from, view.diff.to) : ''}
${triggerSection(deps, workflowApi(place, name), webhookSettings(target, deps.secret, deps.config.baseUrl, deps.config.webhookRatePerMinute))}
${await scheduleSection(deps, target, workflowApi(place, name))}
${eventsSection(`${workflowApi(place, name)}/events`, view.events)}
${callbacksSection(`${workflowApi(place, name)}/callbacks`, view.callbacks)}`,
      })
    }),
  )
}

/** The webhook: enable or pause it, copy its URL, regenerate it (after a confirmation), set its rate. */
function triggerSection(deps: AppDeps, workflowApiPath: string, settings: WebhookSettings): Html {
  const api = `${workflowApiPath}/webhook`
  return html`<h2>Trigger settings</h2>
<p>Manual runs are always available from a record's page. The webhook lets other systems start this workflow.</p>
<h3>Webhook: <span id="webhook-state">${settings.enabled ? 'enabled' : 'disabled'}</span></h3>
${
  settings.url
    ? html`<p><code id="webhook-url">${settings.url}</code> <button type="button" data-copy="#webhook-url">Copy URL</button></p>`
    : html`<p class="muted">Disabled: the URL answers 404. Enabling it again restores the same URL.</p>`
}
<form class="inline" data-api data-method="PATCH" action="${api}"${settings.enabled ? html` data-confirm="Disable the webhook? Calls to its URL are refused (404) until you enable it again."` : ''} data-done="Webhook ${settings.enabled ? 'disabled' : 'enabled'}.">
<input type="hidden" name="enabled" data-type="boolean" value="${settings.enabled ? 'false' : 'true'}">
<button type="submit">${settings.enabled ? 'Disable webhook' : 'Enable webhook'}</button> <span class="form-error" role="alert"></span></form>
<form class="inline" data-api action="${api}/regenerate" data-confirm="Regenerate the URL? The current URL stops working at once." data-done="New webhook URL made: the old one no longer works.">
<button type="submit" class="danger">Regenerate URL</button> <span class="form-error" role="alert"></span></form>
<h3>Rate</h3>
<form data-api data-method="PATCH" action="${api}" data-done="Rate saved.">
<label>Requests per minute (empty: the instance default, now ${deps.config.webhookRatePerMinute}) <input name="ratePerMinute" data-type="nullable-number" inputmode="numeric" size="8" value="${settings.ratePerMinute ?? ''}"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Save rate</button>
</form>`
}

/**
 * The workflow's completion callbacks: each with a Remove form, its URL without its query (as every read shows it),
 * and the form that adds one (its secret and whole URL shown once).
 */
function callbacksSection(api: string, callbacks: CallbackEndpointView[]): Html {
  const events = (list: readonly string[]) => list.map((event) => event.replace('workflow_run.', '')).join(', ')
  return html`<h2>Completion callbacks</h2>
<p>When a run ends (or, if chosen, when one of its tasks opens, is decided or closes), each endpoint receives a JSON POST signed per Standard Webhooks with its own secret; see the run's page for each delivery and its attempts.</p>
<div id="callback-list" data-refresh>${
  callbacks.length === 0
    ? html`<p class="muted">No callback yet.</p>`
    : scrollingTable(html`<table class="callbacks"><thead><tr><th>URL</th><th>Events sent</th><th>Added (UTC)</th><th>Actions</th></tr></thead><tbody>
${callbacks.map((c) => html`<tr><td class="mono">${c.url}</td><td>${events(c.events)}</td><td>${when(c.createdAt)}</td><td><form class="inline" data-api data-method="DELETE" action="${api}/${c.id}" data-confirm="Remove the callback to ${c.url}? Its deliveries go with it." data-done="Callback removed."><button type="submit" class="danger">Remove</button><span class="form-error" role="alert"></span></form></td></tr>`)}
</tbody></table>`, { rowActions: true })
}</div>
<form id="new-callback" data-api action="${api}" data-show="#callback-once" data-show-field="secret" data-done="Callback added: copy its signing secret below, it is shown only once (its whole URL too).">
<label>URL <input name="url" type="url" required maxlength="${CALLBACK_URL_MAX_LENGTH}" size="60" placeholder="https://erp.example.com/trellis-hooks"></label>
<fieldset><legend>Send when</legend>
${CALLBACK_EVENTS.map((event) => html`<label class="check"><input type="checkbox" name="events" value="${event}"${(RUN_CALLBACK_EVENTS as readonly string[]).includes(event) ? ' checked' : ''}> ${events([event])}</label>`)}</fieldset>
<p class="form-error" role="alert"></p>
<button type="submit">Add callback</button>
</form>
<div id="callback-once" class="once" hidden><p><strong>Copy this signing secret now: it is shown only once.</strong> Verify each call with it (Standard Webhooks).</p>
<p><code class="value" id="callback-secret"></code> <button type="button" data-copy="#callback-secret">Copy</button></p>
<p>Its URL, whole this once (the list shows it without its query): <code class="mono" id="callback-url" data-field="url"></code></p>
<p><a href="">Done</a></p></div>`
}
