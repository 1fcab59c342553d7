// Trellis console: pages that follow runs as they progress (served as /console/live.js; no inline script).
// A run's page (#run[data-live-run]) and runs lists (table[data-live-runs]) listen to the run-events stream
// (Server-Sent Events, with the session cookie) and, on each event, read the run's JSON and update in place:
// the status, each step's state, start, finish and duration; a list puts a run it does not show yet on top.
// When a stream fails (a proxy that buffers, too many streams), the page polls the runs it shows instead.
// A run's page also reads its "Waiting for" region again on each task event. The inbox (#inbox[data-live-inbox]) and a
// task's page (#task[data-live-task]) read their regions again (console.js trellisRefresh) on each task or run event;
// every few seconds only where their streams failed or cannot carry everything (more environments than streams, a
// closed task's run that its decider may not follow).
'use strict'

;(() => {
  const EVENT_TYPES = ['run.started', 'step.succeeded', 'step.waiting', 'step.failed', 'run.resumed', 'run.succeeded', 'run.failed', 'run.cancelled', 'run.requeued', 'task.opened', 'task.decided', 'task.escalated', 'task.closed']
  const FINISHED = ['succeeded', 'failed', 'cancelled']
  const POLL_MS = 3000

  // As the server writes them (src/modules/console/page.ts `when`, runs.ts `duration`).
  function when(iso) {
    if (!iso) {
      const none = document.createElement('span')
      none.className = 'muted'
      none.textContent = '—'
      return none
    }
    const time = document.createElement('time')
    time.dateTime = iso
    time.textContent = iso.slice(0, 19).replace('T', ' ')
    return time
  }

  function duration(from, to) {
    if (!from || !to) return ''
    const ms = Math.max(0, Date.parse(to) - Date.parse(from))
    if (ms < 1000) return `${ms} ms`
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`
    return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`
  }

  function status(value) {
    const span = document.createElement('span')
    span.className = `status-${value.replace(' ', '-')}`
    span.textContent = value
    return span
  }

  // A retried run's step carried over as recorded (runs.ts writes the same marker).
  function carried() {
    const span = document.createElement('span')
    span.className = 'muted'
    span.textContent = 'carried from the retried run'
    return span
  }

  function put(parent, ...children) {
    if (parent) parent.replaceChildren(...children)
  }

  async function fetchRun(id) {
    const response = await fetch(`/v1/workflow-runs/${encodeURIComponent(id)}`, { headers: { accept: 'application/json' }, credentials: 'same-origin' })
    if (!response.ok) throw new Error(`${response.status}`)
    return response.json()
  }

  // Follows `url` (an event stream); `onEvent(event)` for each event; `fallback()` once when the stream fails.
  // `finished()` says the page needs no more events (a run's stream then ends by itself: not a failure).
  function follow(url, onEvent, fallback, finished) {
    if (typeof EventSource !== 'function') return fallback()
    const source = new EventSource(url, { withCredentials: true })
    const handle = (message) => {
      let event
      try {
        event = JSON.parse(message.data)
      } catch {
        return
      }
      onEvent(event)
      if (finished()) source.close()
    }
    for (const type of EVENT_TYPES) source.addEventListener(type, handle)
    source.addEventListener('error', () => {
      source.close()
      if (!finished()) fallback()
    })
    return source
  }

  function note(text) {
    const slot = document.querySelector('#run-live')
    if (!slot) return
    slot.textContent = text
    slot.hidden = !text
  }

  // The Retry form the server writes for a run that failed or was cancelled (console.js sends it).
  function retryForm(runId) {
    const form = document.createElement('form')
    form.id = 'run-retry'
    form.action = `/v1/workflow-runs/${encodeURIComponent(runId)}/retry`
    form.dataset.api = ''
    form.dataset.confirm = 'Retry this run from the step it stopped at?'
    form.dataset.next = '/runs/{runId}'
    const button = document.createElement('button')
    button.type = 'submit'
    button.textContent = 'Retry run'
    const error = document.createElement('span')
    error.className = 'form-error'
    error.setAttribute('role', 'alert')
    form.append(button, ' ', error)
    return form
  }

  // A run's page: everything that changes as it runs.
  function runPage(root) {
    const id = root.dataset.liveRun.split('/').pop()
    let current = null
    let polling = null
    const finished = () => current !== null && FINISHED.includes(current)

    function showStep(step, runFinished) {
      const table = root.querySelector('table.steps tbody')
      if (!table) return
      let row = table.querySelector(`tr[data-step="${step.index}"]`)
      if (!row) {
        row = document.createElement('tr')
        row.dataset.step = String(step.index)
        for (const name of ['index', 'name', 'type', 'step-status', 'step-started', 'step-finished', 'step-duration', 'step-output']) {
          const cell = document.createElement('td')
          if (name.startsWith('step-')) cell.className = name
          row.append(cell)
        }
        row.cells[0].textContent = String(step.index + 1)
        table.append(row)
      }
      if (step.status === undefined) {
        put(row.querySelector('.step-status'), status(runFinished ? 'not run' : 'pending'))
        return
      }
      row.cells[1].textContent = step.name
      row.cells[2].textContent = step.type
      put(row.querySelector('.step-status'), ...[status(step.status), ...(step.carriedFrom ? [document.createTextNode(' '), carried()] : [])])
      put(row.querySelector('.step-started'), when(step.startedAt))
      put(row.querySelector('.step-finished'), when(step.finishedAt))
      put(row.querySelector('.step-duration'), document.createTextNode(step.status === 'waiting' && step.output && step.output.until ? `until ${step.output.until.slice(11, 19)}` : duration(step.startedAt, step.finishedAt)))
      const code = document.createElement('code')
      code.textContent = JSON.stringify(step.error ?? step.output ?? null)
      put(row.querySelector('.step-output'), code)
    }

    // The task the run waits for (#run-waiting) and the run's callbacks (#run-callbacks), read again from the page as
    // the server renders it now: on each task event, and when the run ends (its callbacks are queued then, and sent
    // a moment later: read once more after that).
    const readRegions = regionsOf(location.href)
    let endShown = false

    function show(run) {
      const wasWaiting = current === 'waiting'
      current = run.status
      put(root.querySelector('#run-status'), status(run.status))
      put(root.querySelector('#run-started'), when(run.startedAt))
      put(root.querySelector('#run-finished'), when(run.finishedAt))
      const error = root.querySelector('#run-error')
      if (error && run.error) {
        const code = document.createElement('code')
        code.textContent = run.error.code
        put(error.querySelector('td'), code, document.createTextNode(` ${run.error.message}`))
        error.hidden = false
      }
      const recorded = new Set(run.steps.map((step) => step.index))
      for (const step of run.steps) showStep(step, finished())
      for (const row of root.querySelectorAll('table.steps tbody tr[data-step]')) {
        const index = Number(row.dataset.step)
        if (!recorded.has(index)) showStep({ index }, finished())
      }
      if (finished()) {
        const cancel = document.querySelector('#run-cancel')
        if (cancel) cancel.hidden = true
        if (['failed', 'cancelled'].includes(run.status) && !run.retriedBy && !document.querySelector('#run-retry')) root.querySelector('table.run-facts').after(retryForm(run.id))
        if (polling) clearInterval(polling)
        note('')
        if (!endShown) {
          endShown = true
          readRegions()
          setTimeout(readRegions, POLL_MS)
        }
      }
      // Without the stream, the task's region follows the run's status: read while waiting and once after.
      if (polling && (wasWaiting || current === 'waiting')) readRegions()
    }

    const refresh = oneReadAtATime(async () => show(await fetchRun(id)))

    follow(
      `${root.dataset.liveRun}/events`,
      (event) => {
        if (FINISHED.includes(event.status) && event.type.startsWith('run.')) current = event.status
        refresh()
        if (event.type.startsWith('task.')) readRegions()
      },
      () => {
        note('Live updates are unavailable: this page checks the run every few seconds.')
        polling = setInterval(refresh, POLL_MS)
        refresh()
      },
      finished,
    )
  }

  // A runs list: each row's status as it changes, new runs on top.
  function runsList(table) {
    const bases = JSON.parse(table.dataset.recordBases || '{}')
    const body = table.tBodies[0]
    // Runs being read, and those with an event during their read (read once more after it).
    const pending = new Set()
    const again = new Set()

    function cell(...children) {
      const td = document.createElement('td')
      td.append(...children)
      return td
    }

    function link(href, text, className, title) {
      const a = document.createElement('a')
      a.href = href
      a.className = className
      a.textContent = text
      if (title) a.title = title
      return a
    }

    function newRow(run) {
      const row = document.createElement('tr')
      row.dataset.runId = run.id
      const workflow = document.createElement('span')
      workflow.className = 'muted'
      workflow.textContent = `v${run.workflow.version} · ${run.team.name}`
      const base = bases[String(run.workflow.id)]
      const record = base ? link(base + encodeURIComponent(run.recordId), run.recordId, 'mono record-link') : Object.assign(document.createElement('span'), { className: 'mono', textContent: run.recordId })
      const statusCell = cell(status(run.status))
      statusCell.className = 'run-status'
      row.append(
        cell(link(`/runs/${encodeURIComponent(run.id)}`, run.id.slice(0, 8), 'mono run-link', run.id)),
        cell(when(run.createdAt)),
        cell(document.createTextNode(`${run.workflow.name} `), workflow),
        cell(record),
        statusCell,
        cell(document.createTextNode(run.trigger)),
        cell(document.createTextNode(run.user.email)),
      )
      return row
    }

    async function update(runId) {
      if (pending.has(runId)) {
        again.add(runId)
        return
      }
      pending.add(runId)
      try {
        do {
          again.delete(runId)
          const run = await fetchRun(runId)
          const row = body.querySelector(`tr[data-run-id="${CSS.escape(runId)}"]`)
          if (row) put(row.querySelector('.run-status'), status(run.status))
          else {
            body.prepend(newRow(run))
            table.hidden = false
            const empty = table.parentElement.querySelector('.no-runs')
            if (empty) empty.remove()
          }
        } while (again.has(runId))
      } catch {
        // A run this viewer may not read, or a failed read: the next event tries again.
      } finally {
        pending.delete(runId)
      }
    }

    follow(
      table.dataset.liveRuns,
      (event) => update(event.runId),
      () => {
        // Without the stream: the active runs shown are read again every few seconds (new runs need a reload).
        setInterval(() => {
          for (const row of body.querySelectorAll('tr[data-run-id]')) {
            const shown = row.querySelector('.run-status').textContent
            if (!FINISHED.includes(shown)) update(row.dataset.runId)
          }
        }, POLL_MS)
      },
      () => false,
    )
  }

  // `read` as a refresh: one read at a time; a call during a read asks for one more after it.
  function oneReadAtATime(read) {
    let reading = false
    let again = false
    return async function refresh() {
      if (reading) {
        again = true
        return
      }
      reading = true
      try {
        do {
          again = false
          await read()
        } while (again)
      } catch {
        // The next event or poll reads again.
      } finally {
        reading = false
      }
    }
  }

  // The page's regions read again from `from`.
  function regionsOf(from) {
    return oneReadAtATime(() => window.trellisRefresh(from))
  }

  // The inbox: its environments' streams (each carries the task events of the tasks its reader sees), polling only
  // when they are more than it follows (data-poll) or one fails.
  function inbox(root) {
    const refresh = regionsOf(location.href)
    const streams = JSON.parse(root.dataset.liveInbox || '[]')
    let polling = null
    const poll = () => {
      polling ||= setInterval(refresh, POLL_MS)
    }
    if (root.dataset.poll !== undefined) poll()
    for (const url of streams) follow(url, (event) => event.type.startsWith('task.') && refresh(), poll, () => false)
  }

  // A task's page: its state, decisions, form and run, read again on each event of its run (the run's stream), or of
  // the task (a decider's environment stream: then, once the task closed, polled until the run ends).
  function taskPage(root) {
    const refresh = regionsOf(root.dataset.liveTask)
    const runEnded = () => FINISHED.includes(document.querySelector('#task-run [data-run-status]')?.dataset.runStatus)
    let ended = runEnded()
    if (ended) return
    const poll = () => {
      const timer = setInterval(async () => {
        await refresh()
        if (runEnded()) clearInterval(timer)
      }, POLL_MS)
    }
    if (root.dataset.taskEvents) {
      let closed = false
      follow(
        root.dataset.taskEvents,
        (event) => {
          if (event.taskId !== root.dataset.taskId) return
          refresh()
          if (event.type === 'task.closed') {
            closed = true
            poll()
          }
        },
        poll,
        () => closed,
      )
      return
    }
    if (!root.dataset.runEvents) return poll()
    follow(
      root.dataset.runEvents,
      (event) => {
        if (FINISHED.includes(event.status) && event.type.startsWith('run.')) ended = true
        refresh()
      },
      poll,
      () => ended,
    )
  }

  function start() {
    const run = document.querySelector('#run[data-live-run]')
    if (run) runPage(run)
    for (const table of document.querySelectorAll('table[data-live-runs]')) runsList(table)
    const box = document.querySelector('#inbox[data-live-inbox]')
    if (box) inbox(box)
    const task = document.querySelector('#task[data-live-task]')
    if (task) taskPage(task)
  }

  // After the page's load event: a stream opened before it would keep the page loading for as long as it is open.
  if (document.readyState === 'complete') start()
  else window.addEventListener('load', start)
})()
