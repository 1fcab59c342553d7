/**
 * Console: the schedule part of a workflow's trigger settings (docs/workflows.md "Schedules"). The form sends the
 * schedule to the API's `PUT …/schedule` with the session; as the cron or time zone change, `POST …/schedule/preview`
 * answers the next fire times (or the same plain-language error a save would get). The last tick's warning — its
 * runAs user lost its rights, more records than its limit, a filter that no longer fits — is shown above the form.
 */
import { html, type Html } from '../../console/html.ts'
import type { AppDeps } from '../../deps.ts'
import { read } from '../../db/read.ts'
import type { Op } from '../../db/op.ts'
import { findSchedule } from '../../db/schedules.ts'
import type { TriggerTarget } from '../../db/workflows.ts'
import { DEFAULT_TICK_RECORDS, MAX_TICK_RECORDS } from '../schedules/model.ts'
import { scheduleView } from '../schedules/service.ts'
import { when } from './page.ts'

type ScheduleView = ReturnType<typeof scheduleView> extends Op<infer V> ? V : never

/** What each warning of a tick means, in words. */
const WARNINGS: Record<string, string> = {
  run_as_forbidden: 'started nothing: its “run as” user can no longer run this workflow. Choose another user below.',
  over_limit: 'found more records than its limit: the rest wait for the next tick. Raise the limit or narrow the filter.',
  invalid_where: 'started nothing: its filter no longer fits the collection’s fields. Change the filter below.',
}

/** The schedule section of the workflow's page: its state, the last tick, the form that sets it, Remove. */
export async function scheduleSection(deps: AppDeps, target: TriggerTarget, workflowApiPath: string): Promise<Html> {
  const view = await read(
    deps.store,
    (function* () {
      const schedule = yield* findSchedule(target.workflowId)
      return schedule ? yield* scheduleView(schedule, deps.clock.now()) : null
    })(),
  )
  return scheduleHtml(`${workflowApiPath}/schedule`, view)
}

function scheduleHtml(api: string, view: ScheduleView | null): Html {
  const tick = view?.lastTick
  return html`<h3 id="schedule">Schedule: <span id="schedule-state">${view === null ? 'none' : view.enabled ? 'enabled' : 'disabled'}</span></h3>
<p>On each fire time the schedule starts one run per matching record of the collection, as the chosen user; a record that already has an active run of this workflow is skipped.</p>
${tick?.warning ? html`<p class="error" role="status" id="schedule-warning">The last tick (${when(tick.at)} UTC) ${WARNINGS[tick.warning] ?? tick.warning}</p>` : ''}
${tick ? html`<p id="schedule-last-tick">Last tick ${when(tick.at)} UTC: ${tick.started} started, ${tick.skipped} skipped, ${tick.failed} failed${tick.finished ? '' : ' (still starting its runs)'}.</p>` : ''}
<form id="schedule-form" data-api data-method="PUT" action="${api}" data-preview="${api}/preview" data-preview-fields="cron timezone" data-preview-into="#schedule-next" data-done="Schedule saved.">
<label>Cron (minute hour day month weekday; a sixth field in front is seconds) <input name="cron" required maxlength="200" size="24" placeholder="0 9 * * 1-5" value="${view?.cron ?? ''}"></label>
<label>Time zone <input name="timezone" maxlength="100" size="20" placeholder="UTC" value="${view?.timezone ?? 'UTC'}" data-optional></label>
<label>Records matching (the records list's filters as JSON; relative times such as {{now-3d}})
<textarea name="where" data-in="records" data-type="json-object" rows="3" cols="60" placeholder='{"status": {"eq": "pending"}}'>${JSON.stringify(view?.records.where ?? {})}</textarea></label>
<label>At most, per tick <input name="limit" data-in="records" data-type="number" inputmode="numeric" size="6" value="${String(view?.records.limit ?? DEFAULT_TICK_RECORDS)}"> (1–${String(MAX_TICK_RECORDS)})</label>
<label>Run as (email) <input name="runAs" type="email" required size="30" value="${view?.runAs ?? ''}"></label>
<label>After downtime <select name="catchUp">
<option value="once"${view?.catchUp !== 'skip' ? ' selected' : ''}>one tick for what was missed</option>
<option value="skip"${view?.catchUp === 'skip' ? ' selected' : ''}>skip what was missed</option></select></label>
<label>State <select name="enabled" data-type="boolean">
<option value="true"${view?.enabled !== false ? ' selected' : ''}>enabled</option>
<option value="false"${view?.enabled === false ? ' selected' : ''}>disabled</option></select></label>
<p>Next fire times:</p>
<ul id="schedule-next" aria-live="polite">${(view?.nextAt ?? []).map((next) => html`<li>${next.at} (${next.utc.slice(0, 19).replace('T', ' ')} UTC)</li>`)}</ul>
<p class="form-error" role="alert"></p>
<button type="submit">Save schedule</button>
</form>
${
  view === null
    ? ''
    : html`<form class="inline" data-api data-method="DELETE" action="${api}" data-confirm="Remove the schedule? No tick fires after this; a tick under way finishes." data-done="Schedule removed.">
<button type="submit" class="danger">Remove schedule</button> <span class="form-error" role="alert"></span></form>`
}`
}
