// The console's CSV import page (src/modules/console/records-import.ts): previews the chosen file with the API's dry
// run, then imports it through the same route, in chunks of whole records (or in one request, all or nothing).
'use strict'

/** Lines per request when not all-or-nothing, as `trellis records import` sends them. */
const CHUNK_LINES = 5000

const form = document.getElementById('csv-import')
const progress = document.getElementById('import-progress')
const status = document.getElementById('import-status')
const report = document.getElementById('import-report')
const importButton = form.querySelector('button[name="import"]')

/** The header line and chunks of whole records: a line ends a record only where the quotes read so far balance. */
function chunksOf(text, maxLines) {
  const lines = text.split(/(?<=\n)/)
  const records = []
  let record = ''
  let quotes = 0
  let startLine = 1
  lines.forEach((line, i) => {
    if (record === '') startLine = i + 1
    record += line
    quotes += line.split('"').length - 1
    if (quotes % 2 === 0) {
      records.push({ text: record.endsWith('\n') ? record : `${record}\n`, line: startLine })
      record = ''
      quotes = 0
    }
  })
  if (record !== '') records.push({ text: record, line: startLine })
  const [header, ...body] = records
  const chunks = []
  for (let i = 0; i < body.length || (i === 0 && chunks.length === 0); i += maxLines) {
    const part = body.slice(i, i + maxLines)
    chunks.push({ text: (header ? header.text : '') + part.map((r) => r.text).join(''), firstLine: part.length ? part[0].line : 2 })
  }
  return chunks
}

function cell(row, text) {
  const td = document.createElement('td')
  td.textContent = text == null ? '' : String(text)
  row.append(td)
}

function showReport(answer, errors) {
  const columns = report.querySelector('#import-columns tbody')
  columns.replaceChildren()
  for (const c of answer.columns || []) {
    const row = document.createElement('tr')
    cell(row, c.column)
    cell(row, c.field === null ? (c.ignored === 'read-only' ? 'ignored (read-only)' : 'unknown: not imported') : c.field === 'id' && c.type === null ? 'record id' : c.field)
    cell(row, c.type)
    columns.append(row)
  }
  const body = report.querySelector('#import-errors tbody')
  body.replaceChildren()
  for (const e of errors) {
    const row = document.createElement('tr')
    cell(row, e.line)
    cell(row, e.field)
    cell(row, e.reason)
    body.append(row)
  }
  report.querySelector('#import-no-errors').hidden = errors.length > 0
  report.querySelector('#import-errors').hidden = errors.length === 0
  report.hidden = false
}

async function send(text, query) {
  const url = new URL(form.action, location.href)
  url.searchParams.set('teamName', form.dataset.team)
  for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value)
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'text/csv', accept: 'application/json' }, body: text, credentials: 'same-origin' })
  const answer = await response.json().catch(() => ({}))
  if (response.ok || answer.code === 'import_refused') return answer
  throw new Error(answer.message || `${response.status} ${response.statusText}`)
}

async function run(dryRun) {
  const file = form.elements.file.files[0]
  const error = form.querySelector('.form-error')
  error.textContent = ''
  if (!file) {
    error.textContent = 'Choose a CSV file first.'
    return
  }
  const allOrNothing = form.elements.allOrNothing.checked
  const chunks = chunksOf(await file.text(), allOrNothing ? Number.POSITIVE_INFINITY : CHUNK_LINES)
  const total = { lines: 0, created: 0, updated: 0, unchanged: 0, invalid: 0 }
  const errors = []
  let last = {}
  progress.max = chunks.length
  progress.value = 0
  progress.hidden = false
  for (const [i, chunk] of chunks.entries()) {
    status.textContent = `${dryRun ? 'Checking' : 'Importing'}: part ${i + 1} of ${chunks.length}…`
    last = await send(chunk.text, { dryRun: String(dryRun), allOrNothing: String(allOrNothing) })
    for (const key of Object.keys(total)) total[key] += last[key] || 0
    // The server numbers a chunk's lines from its header: back to the file's lines.
    for (const e of last.errors || []) errors.push({ ...e, line: e.line - 2 + chunk.firstLine })
    progress.value = i + 1
  }
  showReport(last, errors)
  const would = dryRun ? 'would be ' : ''
  const counts = `${total.lines} lines: ${total.created} ${would}created, ${total.updated} ${would}updated, ${total.unchanged} unchanged, ${total.invalid} cannot be written.`
  const unknown = (last.unknownColumns || []).length ? ` Unknown columns: ${last.unknownColumns.join(', ')} (add them to the schema or remove them).` : ''
  const refused = last.code === 'import_refused' ? ' Nothing was written (all or nothing).' : ''
  status.textContent = `${dryRun ? 'Preview' : 'Done'}: ${counts}${unknown}${refused}`
  importButton.disabled = dryRun ? (last.unknownColumns || []).length > 0 : importButton.disabled
}

form.addEventListener('change', () => {
  importButton.disabled = true
})
form.addEventListener('submit', async (event) => {
  event.preventDefault()
  const dryRun = event.submitter ? event.submitter.name === 'preview' : true
  const buttons = form.querySelectorAll('button')
  for (const button of buttons) button.disabled = true
  try {
    await run(dryRun)
  } catch (error) {
    form.querySelector('.form-error').textContent = `Import failed: ${error.message}`
  } finally {
    buttons[0].disabled = false
    if (!dryRun) importButton.disabled = true
  }
})
