/** Console: the login page, the list of the user's projects, and a project's overview. */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, scrollingTable } from '../../console/html.ts'
import { queryOf } from '../../http/list.ts'
import { sessionOf } from '../auth/service.ts'
import { canReachRendering, hasProjects, projectsOf } from '../directory/projects.ts'
import { projectLayout } from '../records/service.ts'
import { memberProject } from './access.ts'
import { checklist, checklistDone, checklistHidden, checklistState } from './checklist.ts'
import { htmlResponse, layout, redirect, safeNext } from '../../console/page.ts'
import { consolePage, projectPath, renderingPath, ssoStartPath } from './page.ts'
import { filterOp } from '../../db/op.ts'
import { read } from '../../db/read.ts'

/** The home page of someone in no project: where to go next. */
function emptyHome(instanceAdmin: boolean, anyProject: boolean) {
  if (!instanceAdmin) {
    return html`<p class="notice">You are not a member of any project yet: ask an administrator of this Trellis to add you to one.</p>`
  }
  if (anyProject) {
    return html`<p class="notice">You are not a member of any project. <a href="/admin/projects">All projects</a> lists them: open one's settings to add yourself, or create one.</p>`
  }
  return html`<p class="notice">No project yet: <a href="/admin/projects">create the first one</a>.</p>`
}

/** The "Get started" checklist for an instance administrator, until its steps are done or they hide it. */
function* gettingStarted(user: { id: number; isInstanceAdmin: boolean }, request: Request) {
  if (!user.isInstanceAdmin || checklistHidden(request, user.id)) return ''
  const state = yield* checklistState(user.id)
  return checklistDone(state) ? '' : checklist(state, user.id)
}

export function homePages(deps: AppDeps) {
  return new Elysia({ name: 'console-home', detail: { hide: true } })
    .get('/login', async ({ request }) => {
      const query = queryOf(request)
      const next = safeNext(query.next)
      if ((await read(deps.store, sessionOf(deps.clock, request)))) return redirect(next)
      // After an SSO session's sign-out: the provider's session may still be open; offer to end it too.
      const signedOut = query.signedOut === 'sso' && deps.config.oidc
        ? html`<p class="notice">You are signed out of Trellis. <a href="/auth/sso/logout">Also sign out of your identity provider</a></p>`
        : ''
      const sso = deps.config.oidc ? html`<p><a class="button" id="sso-sign-in" href="${ssoStartPath(next)}">Sign in with SSO</a></p><p class="muted">or with a password:</p>` : ''
      return htmlResponse(
        layout({
          title: 'Sign in',
          body: html`${signedOut}${sso}<form class="login" data-api action="/auth/login" data-next="${next}">
  <label>Email <input name="email" type="email" autocomplete="username" required></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <p class="form-error" role="alert"></p>
  <button type="submit">Sign in</button>
</form>`,
        }),
      )
    })
    .get(
      '/',
      consolePage(deps, async ({ user, request }) => {
        const mine = await read(deps.store, projectsOf(user.id))
        return layout({
          title: 'Projects',
          user,
          body: html`${(await read(deps.store, gettingStarted(user, request)))}${
            mine.length === 0
              ? emptyHome(user.isInstanceAdmin, (await read(deps.store, hasProjects())))
              : scrollingTable(html`<table><thead><tr><th>Project</th><th>Your permission level</th></tr></thead><tbody>
${mine.map((p) => html`<tr><td><a href="${projectPath(p.name)}">${p.name}</a></td><td>${p.role}</td></tr>`)}
</tbody></table>`)
          }`,
        })
      }),
    )
    .get(
      '/p/:project',
      consolePage(deps, async ({ user, params }) => {
        const { project, isAdmin } = await read(deps.store, memberProject(user, params.project!))
        const { environments, teams } = await read(deps.store, projectLayout(project.id))
        const reachable = await read(deps.store, filterOp(teams, (team) => canReachRendering({ userId: user.id, projectId: project.id, teamId: team.id })))
        const name = project.name
        return layout({
          title: name,
          user,
          crumbs: [{ label: 'Projects', href: '/' }],
          body: html`<h2>Environments</h2>
${scrollingTable(html`<table><thead><tr><th>Environment</th><th>Teams you can open</th>${isAdmin ? html`<th>Audit</th>` : ''}</tr></thead><tbody>
${environments.map(
  (env) => html`<tr><td>${env.name}</td>
<td>${reachable.length === 0 ? html`<span class="muted">none</span>` : reachable.map((team, i) => html`${i > 0 ? ' · ' : ''}<a href="${renderingPath(name, env.name, team.name)}">${team.name}</a>`)}</td>
${isAdmin ? html`<td><a href="${projectPath(name, 'e', env.name, 'activity')}">Activity log</a> · <a href="${projectPath(name, 'e', env.name, 'notes')}">Notes</a> · <a href="${projectPath(name, 'e', env.name, 'runs')}">Runs</a> · <a href="${projectPath(name, 'e', env.name, 'health')}">Health</a></td>` : ''}</tr>`,
)}
</tbody></table>`)}
${isAdmin || user.isInstanceAdmin ? html`<h2>Administration</h2><p><a href="${projectPath(name, 'settings')}">Settings, environments, teams, collections, members</a> · <a href="${projectPath(name, 'admin-log')}">Admin log</a> · <a href="${projectPath(name, 'api-access')}">API access (every token of the project)</a></p>` : ''}`,
        })
      }),
    )
}

