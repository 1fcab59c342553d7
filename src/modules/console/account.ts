/**
 * Console: the user's own task e-mail choice and tokens (generate — the value is shown once —, list, revoke) and a project's API access
 * page (its admins see and revoke every token of the project). The forms call `/v1/account/tokens` and
 * `/v1/project/{p}/api-tokens` with the session, so the rules and admin log entries are the API's.
 */
import { Elysia } from 'elysia'
import type { AppDeps } from '../../deps.ts'
import { html, type Html, scrollingTable } from '../../console/html.ts'
import { projectsOf } from '../directory/projects.ts'
import { listTokens, PRESETS, projectTokenView, SCOPES, type TokenListRow, tokenView } from '../tokens/service.ts'
import { productionProjects, type TokenAge, tokenAge } from '../tokens/rotation.ts'
import type { Op } from '../../db/op.ts'
import { adminProject } from './access.ts'
import { layout } from '../../console/page.ts'
import { consolePage, projectPath, when } from './page.ts'
import { read } from '../../db/read.ts'
import { wantsTaskMail } from '../mail/service.ts'

type TokenView = ReturnType<typeof tokenView> & { user?: { email: string } }

const ago = (days: number) => (days === 0 ? 'today' : days === 1 ? '1 day ago' : `${days} days ago`)

/** A token's age, its last use, and — past the rotation advice for its kind of project — a "rotate" flag in words. */
function ageCells(token: TokenView, age: TokenAge): Html {
  const flag = age.overdue
    ? html`<br><span class="badge">Rotate</span> <span class="rotation">older than the ${age.adviceDays}-day advice for ${age.production ? 'production' : 'development'}</span>`
    : ''
  return html`<td>${when(token.createdAt)}<br><span class="muted">created ${ago(age.days)}</span>${flag}</td>
<td>${age.lastUsedDays === null ? html`<span class="muted">never</span>` : html`${when(token.lastUsedAt)}<br><span class="muted">${ago(age.lastUsedDays)}</span>`}</td>`
}

/** The live tokens of a user or a project, each with its age (held to the advice of its project's kind). */
function* agedTokens(deps: AppDeps, filter: { userId: number } | { projectId: number }, view: (row: TokenListRow) => TokenView): Op<{ token: TokenView; age: TokenAge }[]> {
  const rows = yield* listTokens(filter)
  const production = yield* productionProjects(rows.map((row) => row.token.projectId))
  const now = deps.clock.now()
  return rows.map((row) => {
    const token = view(row)
    return { token, age: tokenAge(token, now, production.has(row.token.projectId), deps.config.tokenRotationDays) }
  })
}

function tokenTable(tokens: { token: TokenView; age: TokenAge }[], revokePath: (id: number) => string, withOwner: boolean): Html {
  if (tokens.length === 0) return html`<p class="muted">No live tokens.</p>`
  return scrollingTable(html`<table class="tokens"><thead><tr><th>Name</th>${withOwner ? html`<th>User</th>` : html`<th>Project</th>`}<th>Prefix</th><th>Scopes</th><th>SSO</th><th>Created</th><th>Last used</th><th>Expires</th><th>Actions</th></tr></thead><tbody>
${tokens.map(
  ({ token: t, age }) => html`<tr data-token="${t.name}"><td>${t.name}</td><td>${withOwner ? t.user?.email : t.projectName}</td><td class="mono">${t.prefix}…</td><td>${t.scopes.join(', ')}</td><td>${t.createdWithSso ? 'yes' : 'no'}</td>${ageCells(t, age)}<td>${when(t.expiresAt)}</td>
<td><form class="inline" data-api data-method="DELETE" action="${revokePath(t.id)}" data-confirm="Revoke token “${t.name}”? Calls with it will fail at once." data-done="Token “${t.name}” revoked."><button type="submit" class="danger">Revoke</button><span class="form-error" role="alert"></span></form></td></tr>`,
)}
</tbody></table>`, { rowActions: true })
}

/** What the token lists say about ages: the advice, and that it is advice. */
const rotationNote = (deps: AppDeps) =>
  html`<p class="muted">Rotation advice (not enforced): replace a token after ${deps.config.tokenRotationDays.productionDays} days when its project has a production environment, after ${deps.config.tokenRotationDays.developmentDays} days otherwise.</p>`

/** The person's task e-mail choice, and whether this instance sends mail at all. */
function mailChoice(deps: AppDeps, taskMail: boolean): Html {
  const notice = deps.mail === null
    ? html`<p class="muted" id="mail-notice">This instance sends no e-mail (no SMTP server is configured): your inbox is the only place tasks reach you. Your choice below is kept for when it does.</p>`
    : html`<p class="muted" id="mail-notice">Task e-mail goes to your address above when a task is opened for you, is due soon or is escalated to you, and when a task of a run you started closes (decided, at its deadline, or cancelled with the run).</p>`
  return html`<h2>E-mail</h2>
${notice}
<form id="task-mail" data-api data-method="PATCH" action="/v1/account" data-done="E-mail choice saved.">
<label>Task e-mail <select name="taskMail" data-type="boolean"><option value="true"${taskMail ? html` selected` : ''}>on</option><option value="false"${taskMail ? '' : html` selected`}>off</option></select></label>
<p class="form-error" role="alert"></p>
<button type="submit">Save</button>
</form>`
}

export function accountPages(deps: AppDeps) {
  return new Elysia({ name: 'console-account', detail: { hide: true } })
    .get(
      '/account',
      consolePage(deps, async ({ user }) => {
        const mine = await read(deps.store, agedTokens(deps, { userId: user.id }, tokenView))
        const memberOf = await read(deps.store, projectsOf(user.id))
        const taskMail = await read(deps.store, wantsTaskMail(user.id))
        return layout({
          title: 'Account',
          user,
          crumbs: [{ label: 'Projects', href: '/' }],
          body: html`<p>Signed in as <strong>${user.username}</strong> (${user.email}).</p>
${mailChoice(deps, taskMail)}
<h2>Generate a token</h2>
<form id="new-token" data-api action="/v1/account/tokens" data-show="#token-once" data-show-field="token" data-done="Token generated: copy it below, it is shown only once.">
<label>Name <input name="name" required maxlength="100"></label>
<label>Project <select name="projectName" required>${memberOf.map((p) => html`<option>${p.name}</option>`)}</select></label>
<fieldset><legend>Access</legend>
${Object.entries(PRESETS).map(([name, scopes], i) => html`<label class="check"><input type="radio" name="preset" value="${name}"${i === 0 ? html` checked` : ''}> ${name} <span class="muted">(${scopes.join(', ')})</span></label>`)}
<label class="check"><input type="radio" name="preset" value="" data-optional data-checks="scopes"> these scopes:</label>
${SCOPES.map((s) => html`<label class="check"><input type="checkbox" name="scopes" value="${s}"> ${s}</label>`)}</fieldset>
<label>Expires in days (empty: never) <input name="expiresInDays" data-type="number" inputmode="numeric" size="6"></label>
<p class="form-error" role="alert"></p>
<button type="submit">Generate</button>
</form>
<div id="token-once" class="once" hidden><p><strong>Copy this token now: it is shown only once.</strong></p>
<p><code class="value" id="token-value"></code> <button type="button" data-copy="#token-value">Copy</button></p>
<p><a href="/account">Done</a></p></div>
<h2>Your tokens</h2>
<div id="token-list" data-refresh>${tokenTable(mine, (id) => `/v1/account/tokens/${id}`, false)}</div>
${rotationNote(deps)}`,
        })
      }),
    )
    .get(
      '/p/:project/api-access',
      consolePage(deps, async ({ user, params }) => {
        const project = await read(deps.store, adminProject(user, params.project!))
        const tokens = await read(deps.store, agedTokens(deps, { projectId: project.id }, projectTokenView))
        return layout({
          title: `API access · ${project.name}`,
          user,
          crumbs: [{ label: 'Projects', href: '/' }, { label: project.name, href: projectPath(project.name) }],
          body: html`${tokenTable(tokens, (id) => `/v1/project/${encodeURIComponent(project.name)}/api-tokens/${id}`, true)}${rotationNote(deps)}`,
        })
      }),
    )
}
