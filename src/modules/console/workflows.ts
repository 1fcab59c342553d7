/**
 * Console: a workflow's trigger settings (project admins) — enable or pause the webhook, copy its URL, regenerate
 * it (after a confirmation), set its rate. The forms call the webhook settings API with the session.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html } from '../../console/html.ts'
import { requireWorkflow, webhookSettings } from '../workflows/service.ts'
import { adminProject } from './access.ts'
import { layout } from '../../console/page.ts'
import { consolePage, projectPath, renderingPath } from './page.ts'
import { read } from '../../db/read.ts'

export function workflowPages(deps: AppDeps) {
  return new Elysia({ name: 'console-workflows', detail: { hide: true } }).get(
    '/p/:project/e/:environment/t/:team/w/:workflow',
    consolePage(deps, async ({ user, params }) => {
      const project = await read(deps.store, adminProject(user, params.project!))
      const target = await read(deps.store, requireWorkflow(project.id, params.environment!, params.team!, params.workflow!))
      const settings = webhookSettings(target, deps.secret, deps.config.baseUrl, deps.config.webhookRatePerMinute)
      const api = `/v1/project/${[project.name, 'environment', params.environment!, 'team', params.team!, 'workflows', params.workflow!].map(encodeURIComponent).join('/')}/webhook`
      return layout({
        title: `${params.workflow} · trigger settings`,
        user,
        crumbs: [
          { label: 'Projects', href: '/' },
          { label: project.name, href: projectPath(project.name) },
          { label: `${params.environment} · ${params.team}`, href: renderingPath(project.name, params.environment!, params.team!) },
        ],
        body: html`<p>Manual runs are always available from a record's page. The webhook lets other systems start this workflow.</p>
<h2>Webhook: <span id="webhook-state">${settings.enabled ? 'enabled' : 'disabled'}</span></h2>
${
  settings.url
    ? html`<p><code id="webhook-url">${settings.url}</code> <button type="button" data-copy="#webhook-url">Copy URL</button></p>`
    : html`<p class="muted">Disabled: the URL answers 404. Enabling it again restores the same URL.</p>`
}
<form class="inline" data-api data-method="PATCH" action="${api}">
<input type="hidden" name="enabled" data-type="boolean" value="${settings.enabled ? 'false' : 'true'}">
<button type="submit">${settings.enabled ? 'Disable webhook' : 'Enable webhook'}</button> <span class="form-error" role="alert"></span></form>
<form class="inline" data-api action="${api}/regenerate" data-confirm="Regenerate the URL? The current URL stops working at once.">
<button type="submit" class="danger">Regenerate URL</button> <span class="form-error" role="alert"></span></form>
<h2>Rate</h2>
<form data-api data-method="PATCH" action="${api}">
<label>Requests per minute (empty: the instance default, now ${deps.config.webhookRatePerMinute}) <input name="ratePerMinute" data-type="nullable-number" inputmode="numeric" size="8" value="${settings.ratePerMinute ?? ''}"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Save rate</button>
</form>`,
      })
    }),
  )
}
