// Trellis console behaviour (served as /console/console.js; the CSP allows no inline script).
// Forms marked data-api send their fields as JSON to the management API with the session cookie,
// so every change goes through the same routes, checks and audit entries as an API client's.
'use strict'

function fieldValue(input) {
  const raw = input.value.trim()
  switch (input.dataset.type) {
    case 'number': return raw === '' ? undefined : Number(raw)
    case 'boolean': return raw === 'true'
    case 'nullable-number': return raw === '' ? null : Number(raw)
    case 'json-object': return jsonObject(input.name, raw)
    // Any JSON value (a record's json field); empty: none. Its error names the field as the API would.
    case 'json': return raw === '' ? undefined : jsonValue(fieldName(input), raw)
    // A datetime-local input's value, read as UTC, as the API takes a date-time (seconds and an offset).
    case 'utc-datetime': return raw === '' ? undefined : `${raw}${raw.length === 16 ? ':00' : ''}Z`
    // One value per line (a textarea: the outbound allow-list), blank lines kept so that `entries[3]` is the 4th line.
    case 'lines': return raw === '' ? [] : input.value.split(/\r?\n/).map((value) => value.trim())
    // Comma-separated values (a select field's options); empty: none.
    case 'list': return raw === '' ? undefined : raw.split(',').map((value) => value.trim()).filter((value) => value !== '')
    // A schema row's default, read as the row's type says.
    case 'field-default': return raw === '' ? undefined : fieldDefault(input, raw)
    default: return raw === '' && input.dataset.optional !== undefined ? undefined : input.value
  }
}

// The name an error about this input gives, as the API would: a JSON pointer for a field of a data-in group (a 422),
// `fields[2].default` for an input of a row (a 400).
function fieldName(input) {
  if (input.dataset.in) return `/${input.name}`
  const row = input.closest('[data-row]')
  return row ? `${row.parentElement.dataset.rows}[${rowsOf(row.parentElement).indexOf(row)}].${input.name}` : input.name
}

function jsonValue(name, raw) {
  try {
    return JSON.parse(raw)
  } catch (error) {
    throw new FieldError(name, `not valid JSON (${error.message})`)
  }
}

function fieldDefault(input, raw) {
  const row = input.closest('[data-row]')
  const type = row && row.querySelector('[name=type]') ? row.querySelector('[name=type]').value : 'text'
  if (type === 'number' || type === 'integer') return Number(raw)
  if (type === 'boolean') return raw === 'true'
  if (type === 'multiselect' || type === 'json') return jsonValue(fieldName(input), raw)
  return raw
}

// A radio marked data-checks="NAME" stands for "the NAME boxes below": ticking a box selects it, choosing another
// radio of its group clears the boxes (the token API takes a preset or scopes, never both).
document.addEventListener('change', (event) => {
  const input = event.target
  if (!(input instanceof HTMLInputElement) || !input.form) return
  if (input.type === 'checkbox' && input.checked) {
    const owner = input.form.querySelector(`input[type=radio][data-checks="${input.name}"]`)
    if (owner) owner.checked = true
  }
  if (input.type === 'radio' && input.checked && !input.dataset.checks) {
    for (const owner of input.form.querySelectorAll(`input[type=radio][name="${input.name}"][data-checks]`)) {
      for (const box of input.form.querySelectorAll(`input[type=checkbox][name="${owner.dataset.checks}"]`)) box.checked = false
    }
  }
})

class FieldError extends Error {
  constructor(field, message) {
    super(`${field}: ${message}`)
    this.field = field
  }
}

// A textarea holding a record's data: must be a JSON object; the error names the field before anything is sent.
function jsonObject(name, raw) {
  const value = jsonValue(name, raw)
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new FieldError(name, 'must be a JSON object, like {"status": "new"}')
  return value
}

// A form's action may hold {placeholders} filled from its inputs marked data-path (encoded: ids are untrusted text);
// those inputs go into the address, not the body.
function formAction(form) {
  return form.getAttribute('action').replace(/\{(\w+)\}/g, (_, name) => {
    const input = form.querySelector(`[data-path="${name}"]`)
    const value = input ? input.value.trim() : ''
    if (value === '') throw new FieldError(name, 'required')
    return encodeURIComponent(value)
  })
}

// Inputs marked data-in="input" are the fields of one object of the body (a task's form: `input.amount`); a box
// among them is true or false. The button that submitted may name a field (`decision`) and leave one out (data-omit).
// Rows (a schema's fields): each element marked data-row inside one marked data-rows="fields" is one object of the
// body's list `fields`, in the page's order, made of the inputs in it (a box: true when ticked, else left out).
// A box marked data-list among data-in inputs is one value of a list (a multiselect field's choices).
// A row marked data-row-if="NAME" is left out of the list unless its box NAME is ticked (the events a workflow starts
// on: a row per kind), and a box marked data-value gives its value, not true.
const rowsOf = (container) =>
  Array.from(container.children).filter((child) => {
    if (!child.matches('[data-row]')) return false
    const box = child.dataset.rowIf ? child.querySelector(`input[type=checkbox][name="${child.dataset.rowIf}"]`) : null
    return !box || box.checked
  })

function formJson(form, submitter) {
  const body = {}
  for (const container of form.querySelectorAll('[data-rows]')) body[container.dataset.rows] = rowsOf(container).map(() => ({}))
  for (const input of form.querySelectorAll('input[name], select[name], textarea[name]')) {
    const row = input.closest('[data-row]')
    if (row && form.contains(row)) {
      const container = row.parentElement
      const item = body[container.dataset.rows][rowsOf(container).indexOf(row)]
      if (!item) continue
      const value = input.type === 'checkbox' ? (input.checked ? (input.dataset.value !== undefined ? input.value : true) : undefined) : fieldValue(input)
      if (value !== undefined) item[input.name] = value
      continue
    }
    if (input.dataset.in) {
      const group = (body[input.dataset.in] ||= {})
      if (input.dataset.list !== undefined) {
        const list = (group[input.name] ||= [])
        if (input.checked) list.push(input.value)
        continue
      }
      const value = input.type === 'checkbox' ? input.checked : fieldValue(input)
      if (value !== undefined) group[input.name] = value
      continue
    }
    if (input.type === 'checkbox') {
      if (!input.checked) continue
      ;(body[input.name] ||= []).push(input.value)
      continue
    }
    if (input.type === 'radio' && !input.checked) continue
    const value = fieldValue(input)
    if (value !== undefined) body[input.name] = value
  }
  // The chosen "these boxes" radio sends its group even when none is ticked (the API then names the field).
  for (const radio of form.querySelectorAll('input[type=radio][data-checks]:checked')) body[radio.dataset.checks] ||= []
  if (submitter && submitter.name) body[submitter.name] = submitter.value
  if (submitter && submitter.dataset.omit) delete body[submitter.dataset.omit]
  return body
}

function showError(form, message) {
  const slot = form.querySelector('.form-error')
  if (slot) {
    slot.textContent = message
    linkAllowList(slot, message)
  } else if (message) alert(message)
}

// A refused destination's message names the outbound allow-list's page (src/lib/outbound/policy.ts): link it after the message.
const ALLOW_LIST_PAGE = '/admin/outbound'
function linkAllowList(slot, message) {
  if (!message.includes(ALLOW_LIST_PAGE)) return
  const link = document.createElement('a')
  link.href = ALLOW_LIST_PAGE
  link.className = 'allow-list-link'
  link.textContent = 'Open the outbound allow-list'
  slot.append(' ', link)
}

// The input a field name of an API 400 (`name`, `scopes[0]`, `steps[2].set`) or a FieldError stands for; a JSON
// pointer (`/amount`, a task form's 422) stands for a field of the form's data-in group.
function inputOf(form, field) {
  const text = String(field)
  // `fields[2].options`: the input named options of the third row of data-rows="fields".
  const inRow = /^(\w+)\[(\d+)\]\.(\w+)/.exec(text)
  const container = inRow && form.querySelector(`[data-rows="${inRow[1]}"]`)
  if (container) {
    const row = rowsOf(container)[Number(inRow[2])]
    return row ? row.querySelector(`[name="${inRow[3]}"]`) : undefined
  }
  const inputs = Array.from(form.querySelectorAll('[name], [data-path]'))
  if (text.startsWith('/')) {
    const name = text.split('/')[1].replace(/~1/g, '/').replace(/~0/g, '~')
    return inputs.find((input) => input.dataset.in && input.name === name)
  }
  const name = text.split(/[.[]/)[0]
  return inputs.find((input) => !input.dataset.in && (input.name === name || input.dataset.path === name))
}

let fieldErrors = 0

// Each problem beside its field (aria-invalid, described by the message); answers how many found their field.
function showFieldErrors(form, problems) {
  let placed = 0
  for (const { field, message } of problems) {
    const input = inputOf(form, field)
    if (!input || input.type === 'hidden') continue
    placed++
    const note = document.createElement('span')
    note.className = 'field-error'
    note.id = `field-error-${++fieldErrors}`
    note.textContent = message
    linkAllowList(note, message)
    // A box of a group: after the group's fieldset; any other input: after its label.
    const group = input.type === 'checkbox' || input.type === 'radio' ? input.closest('fieldset') : null
    ;(group || input.closest('label') || input).after(note)
    input.setAttribute('aria-invalid', 'true')
    input.setAttribute('aria-describedby', note.id)
  }
  return placed
}

// The form's own line when its problems are said beside their fields: each said once, the line only points at them.
function showFormProblems(form, problems, summary) {
  const placed = showFieldErrors(form, problems)
  if (placed > 0 && placed === problems.length) showError(form, placed === 1 ? 'Check the field marked above.' : `Check the ${placed} fields marked above.`)
  else showError(form, summary)
}

function clearFieldErrors(form) {
  for (const note of form.querySelectorAll('.field-error')) note.remove()
  for (const input of form.querySelectorAll('[aria-invalid]')) {
    input.removeAttribute('aria-invalid')
    input.removeAttribute('aria-describedby')
  }
}

// What a form says when it worked (data-done), shown in the page's status line — after the reload, when there is one.
const FLASH_KEY = 'trellis.flash'

function say(message) {
  const flash = document.getElementById('flash')
  if (flash && message) flash.textContent = message
}

function sayAfterLoad(message) {
  if (message) sessionStorage.setItem(FLASH_KEY, message)
}

// The lists a shown-once value belongs to are refreshed in place (the value must stay on screen): every element
// marked data-refresh is replaced by its namesake from the page as the server renders it now.
// `from`: another rendering of this page holding the same regions (a task page's live parts, without the record).
async function refreshLists(from = location.href) {
  const regions = document.querySelectorAll('[data-refresh][id]')
  if (regions.length === 0) return
  const response = await fetch(from, { credentials: 'same-origin', headers: { accept: 'text/html' } })
  if (!response.ok) return
  const fresh = new DOMParser().parseFromString(await response.text(), 'text/html')
  for (const region of regions) {
    const replacement = fresh.getElementById(region.id)
    if (replacement) region.replaceWith(document.importNode(replacement, true))
  }
  labelStackedCells(document)
}

// A table whose rows stack as cards on a phone (console.css `.stack`) shows each cell under its column's name.
function labelStackedCells(root) {
  for (const table of root.querySelectorAll('.stack table')) {
    const names = Array.from(table.querySelectorAll('thead th'), (th) => th.textContent.trim())
    for (const row of table.querySelectorAll('tbody tr')) {
      Array.from(row.children).forEach((cell, i) => {
        if (names[i]) cell.dataset.label = names[i]
      })
    }
  }
}
if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', () => labelStackedCells(document))
else labelStackedCells(document)
// live.js refreshes a page's regions the same way when an event says they changed.
window.trellisRefresh = refreshLists

// A 409 "run in progress" names the run that holds the record: link it after the message.
function linkBlockingRun(form, runId) {
  const slot = form.querySelector('.form-error')
  if (!slot) return
  const link = document.createElement('a')
  link.href = `/runs/${encodeURIComponent(runId)}`
  link.className = 'blocking-run'
  link.textContent = 'Open the run in progress'
  slot.append(' ', link)
}

async function submitApiForm(form, submitter) {
  if (form.dataset.confirm && !confirm(form.dataset.confirm)) return
  const method = form.dataset.method || 'POST'
  const button = form.querySelector('button[type=submit], button:not([type])')
  // Busy until the answer: the button cannot be pressed twice, and assistive technology hears the form is working.
  if (button) button.disabled = true
  form.setAttribute('aria-busy', 'true')
  showError(form, '')
  clearFieldErrors(form)
  say('')
  try {
    let action, body
    try {
      action = formAction(form)
      body = method === 'GET' ? undefined : JSON.stringify(formJson(form, submitter))
    } catch (error) {
      if (!(error instanceof FieldError)) throw error
      return showFormProblems(form, [{ field: error.field, message: error.message }], error.message)
    }
    const response = await fetch(action, {
      method,
      headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json', accept: 'application/json' },
      body,
      credentials: 'same-origin',
    })
    const text = await response.text()
    const answer = text ? JSON.parse(text) : {}
    if (!response.ok) {
      const details = Array.isArray(answer.details) ? answer.details.filter((d) => d && d.field && d.message) : []
      showFormProblems(form, details, answer.message || `${response.status} ${response.statusText}`)
      if (answer.runId) linkBlockingRun(form, answer.runId)
      return
    }
    if (form.dataset.show) {
      const target = document.querySelector(form.dataset.show)
      const field = (path) => path.split('.').reduce((at, key) => (at == null ? at : at[key]), answer)
      const value = field(form.dataset.showField || 'value')
      if (value == null) {
        sayAfterLoad(form.dataset.done)
        return location.reload()
      }
      target.querySelector('.value').textContent = value
      // Other fields of the answer shown with it, once (a callback's whole URL beside its secret).
      for (const slot of target.querySelectorAll('[data-field]')) slot.textContent = field(slot.dataset.field) ?? ''
      target.hidden = false
      form.reset()
      say(form.dataset.done)
      await refreshLists()
      return
    }
    // data-stay: the page stays (a live page), its regions read again from data-stay's address.
    if (form.dataset.stay) {
      say(form.dataset.done)
      return await refreshLists(form.dataset.stay)
    }
    sayAfterLoad(form.dataset.done)
    const next = form.dataset.next
    // {runId}, {name}…: filled from the answer (a new run, a renamed project).
    if (next) location.assign(next.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(answer[key] || '')))
    else location.reload()
  } catch (error) {
    showError(form, `Request failed: ${error.message}`)
  } finally {
    if (button) button.disabled = false
    form.removeAttribute('aria-busy')
  }
}

// The message of the action that led here (sessionStorage: this tab only, shown once).
{
  const message = sessionStorage.getItem(FLASH_KEY)
  if (message) {
    sessionStorage.removeItem(FLASH_KEY)
    say(message)
  }
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    // Plain-http origins other than localhost have no clipboard API: select the text instead.
    return false
  }
}

document.addEventListener('submit', (event) => {
  const form = event.target
  if (!(form instanceof HTMLFormElement) || form.dataset.api === undefined) return
  event.preventDefault()
  submitApiForm(form, event.submitter)
})

// A form marked data-preview="URL" (a schedule's) sends the inputs named in data-preview-fields to URL as they change
// (after a short pause) and lists the answer's `nextAt` in the element data-preview-into names, or the API's error.
const previewTimers = new WeakMap()
document.addEventListener('input', (event) => {
  const form = event.target.form
  if (!form || form.dataset.preview === undefined || !form.dataset.previewFields.split(' ').includes(event.target.name)) return
  clearTimeout(previewTimers.get(form))
  previewTimers.set(form, setTimeout(() => previewForm(form), 300))
})

async function previewForm(form) {
  const into = document.querySelector(form.dataset.previewInto)
  const body = {}
  for (const name of form.dataset.previewFields.split(' ')) {
    const input = form.elements.namedItem(name)
    if (input && input.value.trim() !== '') body[name] = input.value.trim()
  }
  if (body.cron === undefined) return void (into.textContent = '')
  const response = await fetch(form.dataset.preview, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) })
  const answer = await response.json().catch(() => ({}))
  into.replaceChildren()
  if (!response.ok) {
    const item = document.createElement('li')
    item.className = 'error'
    item.textContent = answer.message || `Error ${response.status}`
    return void into.append(item)
  }
  for (const next of answer.nextAt) {
    const item = document.createElement('li')
    item.textContent = `${next.at} (${next.utc.slice(0, 19).replace('T', ' ')} UTC)`
    into.append(item)
  }
}

document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-copy]')
  if (!button) return
  const source = document.querySelector(button.dataset.copy)
  const copied = await copyText(source.textContent)
  if (!copied) window.getSelection().selectAllChildren(source)
  button.textContent = copied ? 'Copied' : 'Selected: press Ctrl+C'
})

// "Hide this checklist": a cookie naming the users of this browser who hid it (read by the home page).
document.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-hide-checklist]')
  if (!button) return
  const name = 'trellis_checklist_hidden'
  const current = document.cookie.split('; ').find((cookie) => cookie.startsWith(`${name}=`))
  const users = new Set(current ? current.slice(name.length + 1).split('.') : [])
  users.add(button.dataset.hideChecklist)
  document.cookie = `${name}=${[...users].join('.')}; path=/; max-age=31536000; samesite=lax`
  document.getElementById('checklist')?.remove()
  say('Checklist hidden: it stays hidden in this browser.')
})

// Rows of a form: "Add" (data-add-row="#container") appends a copy of the container's <template>; "Remove"
// (data-remove-row) takes its row out. Nothing is saved until the form is.
document.addEventListener('click', (event) => {
  const add = event.target.closest('button[data-add-row]')
  if (add) {
    const container = document.querySelector(add.dataset.addRow)
    const template = document.getElementById(container.dataset.template)
    const row = template.content.firstElementChild.cloneNode(true)
    container.append(row)
    row.querySelector('input, select')?.focus()
    return
  }
  const remove = event.target.closest('button[data-remove-row]')
  if (remove) remove.closest('[data-row]').remove()
})

// A relation input (data-ids: where its suggestions come from) offers the ids of the related collection that
// contain what was typed, in its <datalist>, a moment after typing stops.
let suggesting
document.addEventListener('input', (event) => {
  const input = event.target
  if (!(input instanceof HTMLInputElement) || !input.dataset.ids || !input.list) return
  clearTimeout(suggesting)
  suggesting = setTimeout(async () => {
    const response = await fetch(`${input.dataset.ids}?q=${encodeURIComponent(input.value.trim())}`, { credentials: 'same-origin', headers: { accept: 'application/json' } })
    if (!response.ok) return
    const { ids } = await response.json()
    input.list.replaceChildren(...ids.map((id) => Object.assign(document.createElement('option'), { value: id })))
  }, 200)
})
