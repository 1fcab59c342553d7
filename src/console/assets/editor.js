// Trellis workflow authoring (served as /console/editor.js; the CSP allows no inline script).
// The editor holds a definition as JSON: its syntax is checked here, with the line and column of the error, before anything is
// sent; then PUT …/workflows/{name} checks it against the API's one schema, and each error it names comes back
// beside the line of the field it names. The "New workflow" form makes version 1 with one load step.
'use strict'

// Where each value of a JSON text starts: a map from its path as the API writes fields (`steps[1].set.status`) to
// its line (1-based). Only called on text JSON.parse accepted.
function jsonLines(text) {
  const lines = new Map()
  let at = 0
  let line = 1
  const skip = () => {
    while (at < text.length && /\s/.test(text[at])) {
      if (text[at] === '\n') line++
      at++
    }
  }
  const string = () => {
    const start = at
    at++
    while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1
    at++
    return JSON.parse(text.slice(start, at))
  }
  const value = (path) => {
    skip()
    lines.set(path, line)
    const c = text[at]
    if (c === '{') {
      at++
      skip()
      if (text[at] === '}') return at++
      for (;;) {
        skip()
        const key = string()
        skip()
        at++ // :
        value(path ? `${path}.${key}` : key)
        skip()
        if (text[at++] === '}') return
      }
    }
    if (c === '[') {
      at++
      skip()
      if (text[at] === ']') return at++
      for (let i = 0; ; i++) {
        value(`${path}[${i}]`)
        skip()
        if (text[at++] === ']') return
      }
    }
    if (c === '"') return string()
    while (at < text.length && /[^\s,\]}]/.test(text[at])) at++
  }
  value('')
  return lines
}

// The line of the field an API error names, or of the nearest enclosing value the text has; null for a field that
// is not in the text (a path parameter). The checks label steps: `steps[2] (3-update).set` is `steps[2].set`.
function lineOf(lines, field) {
  let path = field.replace(/ \([^)]*\)/g, '')
  if (path === '(root)' || path === 'body') return 1
  while (path) {
    if (lines.has(path)) return lines.get(path)
    const cut = Math.max(path.lastIndexOf('.'), path.lastIndexOf('['))
    if (cut <= 0) break
    path = path.slice(0, cut)
  }
  return null
}

// The first syntax error of a text JSON.parse refused, as {line, column, message} (1-based), computed from the text:
// browsers' messages do not all give a place (Chromium names none for a trailing comma).
function jsonSyntaxError(text) {
  let at = 0
  const fail = (message, where = at) => {
    throw { where, message }
  }
  const found = () => (at >= text.length ? 'the end of the text' : `'${text[at]}'`)
  const space = () => {
    while (at < text.length && ' \t\n\r'.includes(text[at])) at++
  }
  const string = () => {
    at++
    for (;;) {
      if (at >= text.length) fail('a string without its closing "')
      const c = text[at]
      if (c === '"') return void at++
      if (c < ' ') fail('a line break or control character inside a string (write \\n)')
      if (c !== '\\') {
        at++
        continue
      }
      const escape = text[at + 1]
      if (escape === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(at + 2, at + 6))) at += 6
      else if (escape !== undefined && '"\\/bfnrt'.includes(escape)) at += 2
      else fail('an unknown escape in a string (\\n, \\", \\\\ and \\uXXXX are JSON\'s)')
    }
  }
  const members = (close, member) => {
    at++
    space()
    if (text[at] === close) return void at++
    for (;;) {
      member()
      space()
      if (text[at] === close) return void at++
      if (text[at] !== ',') fail(`${found()} where ',' or '${close}' belongs`)
      const comma = at++
      space()
      if (text[at] === close) fail(`a comma before '${close}' (remove it: JSON allows no trailing comma)`, comma)
    }
  }
  const value = () => {
    space()
    const c = text[at]
    if (c === '{') {
      return members('}', () => {
        space()
        if (text[at] !== '"') fail(`${found()} where a key in double quotes belongs`)
        string()
        space()
        if (text[at] !== ':') fail(`${found()} where ':' belongs after the key`)
        at++
        value()
      })
    }
    if (c === '[') return members(']', value)
    if (c === '"') return string()
    const word = /^(true|false|null|-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?)/.exec(text.slice(at, at + 400))
    if (!word || word[0] === '-') fail(`${found()} where a value belongs`)
    at += word[0].length
  }
  try {
    value()
    space()
    if (at < text.length) fail(`${found()} after the end of the definition`)
    return null
  } catch (error) {
    if (!error || typeof error.where !== 'number') throw error
    const before = text.slice(0, error.where).split('\n')
    return { line: before.length, column: before[before.length - 1].length + 1, message: error.message }
  }
}

// A text JSON.parse refused, as a problem beside its line.
function syntaxProblem(text, parseError) {
  const found = jsonSyntaxError(text)
  return found
    ? { line: found.line, field: '', message: `Not valid JSON at line ${found.line}, column ${found.column}: ${found.message}` }
    : { line: 1, field: '', message: `Not valid JSON: ${parseError.message}` }
}

function editorParts(form) {
  return {
    textarea: form.querySelector('textarea[name=definition]'),
    gutter: form.querySelector('.gutter'),
    problems: form.querySelector('.editor-problems'),
    result: form.querySelector('.editor-result'),
  }
}

// Line numbers beside the text; a line with a problem is marked (its messages as the marker's title).
function drawGutter(form, marked = new Map()) {
  const { textarea, gutter } = editorParts(form)
  gutter.replaceChildren()
  const count = textarea.value.split('\n').length
  for (let n = 1; n <= count; n++) {
    const number = document.createElement('span')
    number.textContent = marked.has(n) ? `● ${n}` : String(n)
    if (marked.has(n)) {
      number.className = 'bad'
      number.title = marked.get(n).join('\n')
      number.dataset.line = String(n)
    }
    gutter.append(number, '\n')
  }
  gutter.scrollTop = textarea.scrollTop
}

function selectLine(textarea, line) {
  const starts = textarea.value.split('\n')
  const start = starts.slice(0, line - 1).reduce((sum, text) => sum + text.length + 1, 0)
  textarea.focus()
  textarea.setSelectionRange(start, start + (starts[line - 1] ?? '').length)
  const lineHeight = textarea.scrollHeight / starts.length
  textarea.scrollTop = Math.max(0, (line - 3) * lineHeight)
}

// Each problem as "Line N: field: message" (a button that selects the line), and the markers in the gutter.
function showProblems(form, problems) {
  const { problems: list, textarea } = editorParts(form)
  list.replaceChildren()
  const marked = new Map()
  for (const { line, field, message } of problems) {
    const item = document.createElement('li')
    if (line !== null) {
      const button = document.createElement('button')
      button.type = 'button'
      button.textContent = `Line ${line}`
      button.addEventListener('click', () => selectLine(textarea, line))
      item.append(button, ': ')
      marked.set(line, [...(marked.get(line) ?? []), message])
    }
    item.append(field ? `${field}: ${message}` : message)
    list.append(item)
  }
  drawGutter(form, marked)
}

function showResult(form, parts) {
  const { result } = editorParts(form)
  result.replaceChildren(...parts)
}

function link(text, href) {
  const a = document.createElement('a')
  a.href = href
  a.textContent = text
  return a
}

async function sendJson(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json', accept: 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  })
  const text = await response.text()
  return { response, answer: text ? JSON.parse(text) : {} }
}

async function publish(form) {
  const { textarea } = editorParts(form)
  const text = textarea.value
  showResult(form, [])
  let body
  try {
    body = JSON.parse(text)
  } catch (error) {
    return showProblems(form, [syntaxProblem(text, error)])
  }
  showProblems(form, [])
  const { response, answer } = await sendJson('PUT', form.getAttribute('action'), body)
  if (!response.ok) {
    const lines = jsonLines(text)
    const details = answer.details && answer.details.length > 0 ? answer.details : [{ field: '', message: answer.message || `${response.status} ${response.statusText}` }]
    // The builder (builder.js) puts the same problems beside its fields.
    form.dispatchEvent(new CustomEvent('trellis:problems', { detail: details }))
    return showProblems(form, details.map((d) => ({ line: d.field ? lineOf(lines, d.field) : null, field: d.field, message: d.message })))
  }
  form.dispatchEvent(new CustomEvent('trellis:problems', { detail: [] }))
  const page = form.dataset.page
  if (answer.outcome === 'unchanged') {
    return showResult(form, [`Unchanged: v${answer.version} is still the active version; nothing was published.`])
  }
  // The summary, the steps and the versions as the server renders them now (console.js), the editor's text kept.
  await window.trellisRefresh()
  const compare = answer.version > 1 ? [link(`Compare v${answer.version - 1} → v${answer.version}`, `${page}?from=${answer.version - 1}&to=${answer.version}#diff`)] : []
  showResult(form, [`Published v${answer.version}. The webhook URL is unchanged; the page shows the new version. `, ...compare])
}

// A new workflow: refused when the name is taken (a PUT would publish over it), else version 1, then its page.
async function createWorkflow(form) {
  const error = form.querySelector('.form-error')
  const name = form.elements.workflowName.value.trim()
  if (name === '') return (error.textContent = 'Name: required')
  const url = form.getAttribute('action') + encodeURIComponent(name)
  const existing = await sendJson('GET', url)
  if (existing.response.ok) return (error.textContent = `A workflow named “${name}” already exists for this team: open it from the list above.`)
  const { response, answer } = await sendJson('PUT', url, { collection: form.elements.collection.value, steps: [{ type: 'load' }] })
  if (!response.ok) return (error.textContent = answer.message || `${response.status} ${response.statusText}`)
  // Said on the next page by console.js's status line (the same key as its data-done messages).
  sessionStorage.setItem('trellis.flash', `Workflow “${name}” created: version 1 is published.`)
  location.assign(form.dataset.next + encodeURIComponent(name))
}

async function submitted(form, work) {
  const button = form.querySelector('button[type=submit]')
  button.disabled = true
  try {
    await work(form)
  } catch (error) {
    const slot = form.querySelector('.form-error') || editorParts(form).problems
    slot.textContent = `Request failed: ${error.message}`
  } finally {
    button.disabled = false
  }
}

// "Add a step": the chosen type's template appended to `steps`, the text rewritten as the page writes it, the new
// step selected. A text that is not JSON is left as it is, its error shown.
function addStep(form) {
  const { textarea } = editorParts(form)
  let body
  try {
    body = textarea.value.trim() === '' ? {} : JSON.parse(textarea.value)
  } catch (error) {
    return showProblems(form, [syntaxProblem(textarea.value, error)])
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return showProblems(form, [{ line: 1, field: '', message: 'The definition must be a JSON object' }])
  if (!Array.isArray(body.steps)) body.steps = []
  body.steps.push(JSON.parse(form.querySelector('#step-template').value))
  textarea.value = JSON.stringify(body, null, 2)
  showProblems(form, [])
  selectLine(textarea, jsonLines(textarea.value).get(`steps[${body.steps.length - 1}]`))
}

document.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-add-step]')
  if (button) addStep(button.form)
})

document.addEventListener('submit', (event) => {
  const form = event.target
  if (!(form instanceof HTMLFormElement)) return
  const work = form.dataset.editor !== undefined ? publish : form.dataset.newWorkflow !== undefined ? createWorkflow : null
  if (!work) return
  event.preventDefault()
  submitted(form, work)
})

for (const form of document.querySelectorAll('form[data-editor]')) {
  const { textarea, gutter } = editorParts(form)
  drawGutter(form)
  // Markers belong to the text they were found in: editing redraws plain numbers.
  textarea.addEventListener('input', () => drawGutter(form))
  textarea.addEventListener('scroll', () => (gutter.scrollTop = textarea.scrollTop))
}
