// Trellis workflow builder (served as /console/builder.js; the CSP allows no inline script).
// The builder edits the same definition as the JSON editor (editor.js), step by step: each edit rewrites the JSON
// text, and a JSON edit that parses redraws the builder. Each field is checked as it changes against the step schemas
// the API validates with (given by the page, never copied here); what only the API can check comes back from Publish
// or a dry run, beside the field it names. A dry run (POST …/workflows/{name}/dry-run) shows what each step would do on
// a record, writing nothing. Everything lives in this one function: console.js and editor.js share the global scope.
;(() => {
  'use strict'
  const form = document.querySelector('form[data-editor]')
  const root = form && form.querySelector('[data-builder]')
  if (!root) return
  const DATA = JSON.parse(root.dataset.builder)
  const VARIABLE = new RegExp(DATA.variable)
  const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g
  const textarea = form.querySelector('textarea[name=definition]')
  const tabs = form.querySelector('.editor-tabs')
  const tabBuilder = form.querySelector('#tab-builder')
  const tabJson = form.querySelector('#tab-json')
  const panelJson = form.querySelector('#panel-json')
  const dryRun = form.querySelector('.dry-run')
  const DUE_UNITS = [['days', 86400], ['hours', 3600], ['minutes', 60], ['seconds', 1]]
  const FORM_TYPES = ['string', 'number', 'integer', 'boolean']

  let definition = null
  let ids = 0
  const newId = (what) => `b-${what}-${++ids}`

  // ── Small DOM helpers ─────────────────────────────────────────────────────────
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag)
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue
      if (key.startsWith('on')) node.addEventListener(key.slice(2), value)
      else if (key === 'text') node.textContent = value
      else if (key === 'value') node.value = value
      else if (key === 'checked') node.checked = value
      else node.setAttribute(key, value === true ? '' : value)
    }
    node.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false))
    return node
  }
  const button = (text, onclick, attrs = {}) => el('button', { type: 'button', onclick, ...attrs }, text)

  // ── The definition and the JSON text ─────────────────────────────────────────
  function parsed() {
    try {
      const value = JSON.parse(textarea.value)
      return value && typeof value === 'object' && !Array.isArray(value) ? value : null
    } catch {
      return null
    }
  }

  // The text as the builder writes it; editor.js redraws its gutter on `input`.
  function write() {
    if (!Array.isArray(definition.steps)) definition.steps = []
    textarea.value = JSON.stringify(definition, null, 2)
    writing = true
    textarea.dispatchEvent(new Event('input', { bubbles: true }))
    writing = false
    checkAll()
  }
  let writing = false
  textarea.addEventListener('input', () => {
    if (writing) return
    const value = parsed()
    if (value) {
      definition = value
      if (!root.hidden) render()
    }
  })

  // ── Checking a value against the API's schema (the JSON Schema subset TypeBox writes; each node's `rule` is the
  // API's wording of it, given by the page) ──
  function check(schema, value, path, out) {
    const push = (message, at = path) => out.push({ path: at, message })
    const join = (key) => (/^\d+$/.test(String(key)) ? `${path}[${key}]` : path ? `${path}.${key}` : key)
    if (Array.isArray(schema.anyOf)) {
      const fits = schema.anyOf.some((member) => {
        const inner = []
        check(member, value, path, inner)
        return inner.length === 0
      })
      if (!fits) push(schema.rule)
      return
    }
    if (schema.const !== undefined) return void (value !== schema.const && push(schema.rule))
    switch (schema.type) {
      case 'string':
        if (typeof value !== 'string') return push(schema.rule)
        if ((schema.minLength !== undefined && value.length < schema.minLength) || (schema.maxLength !== undefined && value.length > schema.maxLength)) return push(schema.rule)
        if (schema.pattern && !new RegExp(schema.pattern).test(value)) return push(schema.rule)
        return
      case 'integer':
      case 'number':
        if (typeof value !== 'number' || !Number.isFinite(value) || (schema.type === 'integer' && !Number.isInteger(value))) return push(schema.rule)
        if ((schema.minimum !== undefined && value < schema.minimum) || (schema.maximum !== undefined && value > schema.maximum)) push(schema.rule)
        return
      case 'boolean':
      case 'null':
        return void (typeof value !== schema.type && !(schema.type === 'null' && value === null) && push(schema.rule))
      case 'array':
        if (!Array.isArray(value)) return push(schema.rule)
        if (schema.minItems !== undefined && value.length < schema.minItems) return push(`must have at least ${schema.minItems} item${schema.minItems === 1 ? '' : 's'}`)
        if (schema.maxItems !== undefined && value.length > schema.maxItems) return push(schema.rule)
        if (schema.uniqueItems && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) return push('must not repeat an item')
        if (schema.items) value.forEach((item, i) => check(schema.items, item, join(i), out))
        return
      case 'object': {
        if (!value || typeof value !== 'object' || Array.isArray(value)) return push(schema.rule)
        const properties = schema.properties || {}
        for (const name of schema.required || []) if (!Object.hasOwn(value, name)) push(`is required (${(properties[name] || {}).rule})`, join(name))
        if (schema.minProperties !== undefined && Object.keys(value).length < schema.minProperties) {
          const names = Object.keys(properties)
          push(names.length > 0 ? `must set at least ${schema.minProperties} of ${names.join(', ')}` : `must have at least ${schema.minProperties} field${schema.minProperties === 1 ? '' : 's'}`)
        }
        for (const [name, inner] of Object.entries(value)) {
          if (Object.hasOwn(properties, name)) check(properties[name], inner, join(name), out)
          else if (schema.patternProperties) {
            for (const [pattern, sub] of Object.entries(schema.patternProperties)) if (new RegExp(pattern).test(name)) check(sub, inner, join(name), out)
          } else if (schema.additionalProperties === false) push('unknown field', join(name))
        }
      }
    }
  }

  // A step's problems (paths inside the step: `if.field`), its schema's and its templates'.
  function stepProblems(step) {
    const schema = DATA.schemas[step && step.type]
    if (!schema) return [{ path: 'type', message: `must be one of ${DATA.types.join(', ')}` }]
    const out = []
    check(schema, step, '', out)
    const walk = (value, path) => {
      if (typeof value === 'string') {
        for (const m of value.matchAll(PLACEHOLDER)) if (!VARIABLE.test(m[1])) out.push({ path, message: `unknown template variable {{${m[1]}}}` })
      } else if (Array.isArray(value)) value.forEach((v, i) => walk(v, `${path}[${i}]`))
      else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) walk(v, path ? `${path}.${k}` : k)
    }
    walk(step, '')
    return out
  }

  // ── Errors beside fields ──────────────────────────────────────────────────────
  // The error slot of a path in a card: the field of that path, else of its nearest enclosing path, else the card's.
  function slotOf(container, path) {
    let at = path
    for (;;) {
      const slot = [...container.querySelectorAll('[data-error-for]')].find((s) => s.dataset.errorFor === at)
      if (slot) return slot
      if (!at) return null
      const cut = Math.max(at.lastIndexOf('.'), at.lastIndexOf('['))
      at = cut <= 0 ? '' : at.slice(0, cut)
    }
  }

  function clearErrors(container) {
    for (const slot of container.querySelectorAll('[data-error-for]')) {
      slot.textContent = ''
      const input = slot.dataset.input && document.getElementById(slot.dataset.input)
      if (input) input.removeAttribute('aria-invalid')
    }
  }

  function showError(container, path, message) {
    const slot = slotOf(container, path)
    if (!slot) return false
    const relative = path && slot.dataset.errorFor !== path ? `${path}: ` : ''
    slot.textContent = slot.textContent ? `${slot.textContent}; ${relative}${message}` : `${relative}${message}`
    const input = slot.dataset.input && document.getElementById(slot.dataset.input)
    if (input) input.setAttribute('aria-invalid', 'true')
    return true
  }

  function checkCard(card) {
    clearErrors(card)
    const step = definition.steps[Number(card.dataset.index)]
    for (const p of stepProblems(step)) showError(card, p.path, p.message)
  }

  function checkAll() {
    if (root.hidden) return
    for (const card of root.querySelectorAll('.step-card')) checkCard(card)
  }

  // Problems the API named (`definition.steps[2] (3-update).set.status`), each beside its field in the builder.
  function showApiProblems(details) {
    if (root.hidden || !definition) return
    for (const card of root.querySelectorAll('.step-card')) checkCard(card)
    clearErrors(root.querySelector('.builder-top'))
    for (const { field, message } of details) {
      const path = String(field || '').replace(/^definition\.?/, '').replace(/ \([^)]*\)/g, '')
      const step = /^steps\[(\d+)\]\.?(.*)$/.exec(path)
      if (step) {
        const card = root.querySelector(`.step-card[data-index="${step[1]}"]`)
        if (card) showError(card, step[2], message)
      } else showError(root.querySelector('.builder-top'), path, message)
    }
  }
  form.addEventListener('trellis:problems', (event) => showApiProblems(event.detail || []))

  // ── Template variables offered as you type `{{` ───────────────────────────────
  function variablesBefore(index) {
    const collection = DATA.collections.find((c) => c.name === definition.collection)
    const names = ['record.id', ...(collection ? collection.fields.map((f) => `record.${f.name}`) : []), 'workflow.name', 'run.id', 'now']
    for (const step of definition.steps.slice(0, index)) {
      if (!step || step.type !== 'task' || !step.name) continue
      names.push(`tasks.${step.name}.decision`, `tasks.${step.name}.decidedBy`)
      const properties = (step.form && step.form.properties) || {}
      for (const field of Object.keys(properties)) names.push(`tasks.${step.name}.input.${field}`)
    }
    return names
  }

  const suggest = el('ul', { id: 'builder-suggestions', class: 'suggestions', role: 'listbox', 'aria-label': 'Template variables', hidden: true })
  let suggestFor = null
  let suggestChoices = []
  let suggestActive = 0

  function closeSuggestions() {
    suggest.hidden = true
    if (suggestFor) suggestFor.removeAttribute('aria-activedescendant')
    suggestFor = null
  }

  function openSuggestions(input, index) {
    const before = input.value.slice(0, input.selectionStart)
    const typed = /\{\{\s*([\w.-]*)$/.exec(before)
    if (!typed) return closeSuggestions()
    suggestChoices = variablesBefore(index).filter((name) => name.startsWith(typed[1]))
    if (suggestChoices.length === 0) return closeSuggestions()
    suggestFor = input
    suggestActive = 0
    suggest.replaceChildren(
      ...suggestChoices.map((name, i) =>
        el('li', { id: `builder-suggestion-${i}`, role: 'option', 'aria-selected': i === 0 ? 'true' : 'false', onmousedown: (event) => (event.preventDefault(), pick(i)) }, `{{${name}}}`),
      ),
    )
    input.setAttribute('aria-activedescendant', 'builder-suggestion-0')
    input.after(suggest)
    suggest.hidden = false
  }

  function pick(i) {
    const input = suggestFor
    if (!input) return
    const at = input.selectionStart
    const before = input.value.slice(0, at).replace(/\{\{\s*[\w.-]*$/, `{{${suggestChoices[i]}}}`)
    input.value = before + input.value.slice(at).replace(/^[\w.-]*\}\}/, '')
    input.setSelectionRange(before.length, before.length)
    closeSuggestions()
    input.dispatchEvent(new Event('input', { bubbles: true }))
    input.focus()
  }

  function moveSuggestion(by) {
    suggestActive = (suggestActive + by + suggestChoices.length) % suggestChoices.length
    suggest.querySelectorAll('[role=option]').forEach((option, i) => option.setAttribute('aria-selected', i === suggestActive ? 'true' : 'false'))
    suggestFor.setAttribute('aria-activedescendant', `builder-suggestion-${suggestActive}`)
  }

  // A text field that takes templates: `{{` opens the list of variables; ↑ ↓ choose, Enter or Tab takes, Escape closes.
  function templated(input, index) {
    input.classList.add('template')
    input.addEventListener('input', () => openSuggestions(input, index))
    input.addEventListener('blur', () => setTimeout(() => suggestFor === input && closeSuggestions(), 100))
    input.addEventListener('keydown', (event) => {
      if (suggest.hidden || suggestFor !== input) return
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') moveSuggestion(event.key === 'ArrowDown' ? 1 : -1)
      else if (event.key === 'Enter' || event.key === 'Tab') pick(suggestActive)
      else if (event.key === 'Escape') closeSuggestions()
      else return
      event.preventDefault()
    })
    return input
  }

  // ── Fields ────────────────────────────────────────────────────────────────────
  // A labelled input with its error slot (`path` inside the step, as the API names it).
  function field(label, input, path, hint) {
    input.id = input.id || newId('f')
    const error = el('span', { class: 'field-error', id: newId('e'), 'data-error-for': path, 'data-input': input.id })
    const hintNode = hint ? el('span', { class: 'muted hint', id: newId('h') }, hint) : null
    input.setAttribute('aria-describedby', [error.id, hintNode && hintNode.id].filter(Boolean).join(' '))
    return el('div', { class: 'b-field' }, el('label', { for: input.id }, label), input, hintNode, error)
  }

  function datalist(values) {
    const id = newId('list')
    root.append(el('datalist', { id }, values.map((value) => el('option', { value }))))
    return id
  }

  // The choices a schema offers at a path (its `anyOf` of constants).
  function choicesAt(type, path) {
    let schema = DATA.schemas[type]
    for (const key of path) schema = schema && schema.properties && schema.properties[key]
    return schema && Array.isArray(schema.anyOf) ? schema.anyOf.map((m) => m.const) : []
  }

  const getAt = (object, path) => path.reduce((value, key) => (value && typeof value === 'object' ? value[key] : undefined), object)
  function setAt(object, path, value) {
    let at = object
    for (const key of path.slice(0, -1)) {
      if (!at[key] || typeof at[key] !== 'object') at[key] = {}
      at = at[key]
    }
    const last = path[path.length - 1]
    if (value === undefined) delete at[last]
    else at[last] = value
    // An object left empty by the builder (`dueIn` without a unit) is taken out.
    if (path.length > 1 && Object.keys(at).length === 0) setAt(object, path.slice(0, -1), undefined)
  }

  /** A value typed as text: a number, true, false or null as such, anything else as text. */
  function scalarOf(text) {
    const trimmed = text.trim()
    if (trimmed === 'true' || trimmed === 'false' || trimmed === 'null') return JSON.parse(trimmed)
    if (trimmed !== '' && /^-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(trimmed)) return Number(trimmed)
    return text
  }
  const shown = (value) => (value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value))
  const listOf = (text) => text.split(',').map((s) => s.trim()).filter(Boolean)

  // An input bound to `path` of the step: `read` turns its text into the value (undefined: taken out).
  function bound(step, index, path, input, read) {
    input.addEventListener('input', () => {
      setAt(step, path, read(input))
      write()
    })
    input.addEventListener('change', () => {
      setAt(step, path, read(input))
      write()
    })
    return input
  }

  const textInput = (step, index, path, { optional = false, template = false, list, multiline = false } = {}) => {
    const value = shown(getAt(step, path))
    const input = multiline ? el('textarea', { rows: 3, spellcheck: 'false' }) : el('input', { type: 'text', autocomplete: 'off', list })
    input.value = value
    if (template) templated(input, index)
    return bound(step, index, path, input, (i) => (optional && i.value === '' ? undefined : i.value))
  }

  const numberInput = (step, index, path, { optional = true } = {}) => {
    const input = el('input', { type: 'text', inputmode: 'numeric', autocomplete: 'off', size: 8, value: shown(getAt(step, path)) })
    return bound(step, index, path, input, (i) => (i.value.trim() === '' ? (optional ? undefined : '') : Number.isNaN(Number(i.value)) ? i.value : Number(i.value)))
  }

  const selectInput = (step, index, path, options, { optional = false, labels = {} } = {}) => {
    const current = getAt(step, path)
    const input = el(
      'select',
      {},
      optional ? el('option', { value: '' }, '(default)') : null,
      options.map((o) => el('option', { value: o, selected: current === o }, labels[o] || o)),
    )
    return bound(step, index, path, input, (i) => (i.value === '' ? undefined : i.value))
  }

  const listInput = (step, index, path, list) => {
    const input = el('input', { type: 'text', autocomplete: 'off', list, value: (getAt(step, path) || []).join(', ') })
    return bound(step, index, path, input, (i) => (listOf(i.value).length === 0 ? undefined : listOf(i.value)))
  }

  // Rows of name and value (an update's `set`, an http step's headers): the object is rebuilt from the rows in order.
  function rows({ step, index, path, legend, names, keyLabel, valueLabel, readValue, template, addLabel }) {
    const container = el('div', { class: 'rows' })
    const rebuild = () => {
      const entries = [...container.querySelectorAll('.row')].map((row) => [row.querySelector('.row-key').value.trim(), row.querySelector('.row-value').value]).filter(([key]) => key !== '')
      setAt(step, path, entries.length === 0 ? (path[0] === 'set' ? {} : undefined) : Object.fromEntries(entries.map(([key, text]) => [key, readValue(key, text)])))
      write()
    }
    const addRow = (key, value) => {
      const keyInput = el('input', { type: 'text', class: 'row-key', autocomplete: 'off', list: names, value: key, oninput: rebuild })
      const valueInput = el('input', { type: 'text', class: 'row-value', autocomplete: 'off', value: shown(value), oninput: rebuild })
      if (template) templated(valueInput, index)
      const row = el('div', { class: 'row' })
      const slot = () => (keyInput.value.trim() ? `${path.join('.')}.${keyInput.value.trim()}` : `${path.join('.')}.?`)
      const error = el('span', { class: 'field-error', id: newId('e'), 'data-error-for': slot(), 'data-input': valueInput.id = newId('f') })
      keyInput.id = newId('f')
      keyInput.addEventListener('input', () => (error.dataset.errorFor = slot()))
      keyInput.setAttribute('aria-describedby', error.id)
      valueInput.setAttribute('aria-describedby', error.id)
      row.append(
        el('label', { for: keyInput.id }, keyLabel),
        keyInput,
        el('label', { for: valueInput.id }, valueLabel),
        valueInput,
        button('Remove', () => (row.remove(), rebuild()), { class: 'link', 'aria-label': `Remove ${keyLabel.toLowerCase()} ${key || ''}`.trim() }),
        error,
      )
      container.append(row)
      return keyInput
    }
    for (const [key, value] of Object.entries(getAt(step, path) || {})) addRow(key, value)
    const error = el('span', { class: 'field-error', 'data-error-for': path.join('.') })
    return el('fieldset', { class: 'b-rows' }, el('legend', {}, legend), container, error, button(addLabel, () => addRow('', '').focus()))
  }

  // ── One form per step type ────────────────────────────────────────────────────
  const collectionOf = () => DATA.collections.find((c) => c.name === definition.collection)
  const STRING_TYPES = ['text', 'email', 'url', 'date', 'datetime', 'select', 'relation']

  const FORMS = {
    load: () => [el('p', { class: 'muted' }, 'Reads the record as the run’s user.')],

    condition(step, index) {
      const fieldNames = datalist([...(collectionOf() || { fields: [] }).fields.map((f) => f.name), ...variablesBefore(index).filter((v) => v.startsWith('tasks.'))])
      const operators = ['equals', 'notEquals', 'in', 'exists', 'gt', 'gte', 'lt', 'lte', 'contains']
      const labels = { equals: 'equals', notEquals: 'does not equal', in: 'is one of (comma-separated)', exists: 'is present (true) or absent (false)', gt: '>', gte: '≥', lt: '<', lte: '≤', contains: 'contains' }
      const tests = el('div', { class: 'rows' })
      const rebuild = () => {
        const test = { field: (step.if && step.if.field) || '' }
        for (const row of tests.querySelectorAll('.row')) {
          const op = row.querySelector('select').value
          const text = row.querySelector('input').value
          test[op] = op === 'in' ? listOf(text).map(scalarOf) : op === 'contains' ? text : op === 'exists' ? text.trim() !== 'false' : scalarOf(text)
        }
        step.if = test
        write()
      }
      const addTest = (op, value) => {
        const select = el('select', { id: newId('f'), onchange: rebuild }, operators.map((o) => el('option', { value: o, selected: o === op }, labels[o])))
        const input = el('input', { type: 'text', id: newId('f'), autocomplete: 'off', value: op === 'in' && Array.isArray(value) ? value.map(shown).join(', ') : shown(value), oninput: rebuild })
        const row = el('div', { class: 'row' })
        const error = el('span', { class: 'field-error', id: newId('e'), 'data-error-for': `if.${op}`, 'data-input': input.id })
        select.addEventListener('change', () => (error.dataset.errorFor = `if.${select.value}`))
        input.setAttribute('aria-describedby', error.id)
        row.append(el('label', { for: select.id }, 'Test'), select, el('label', { for: input.id }, 'Value'), input, button('Remove', () => (row.remove(), rebuild()), { class: 'link', 'aria-label': 'Remove this test' }), error)
        tests.append(row)
        return select
      }
      for (const [op, value] of Object.entries(step.if || {})) if (op !== 'field') addTest(op, value)
      const fieldInput = textInput(step, index, ['if', 'field'], { list: fieldNames })
      return [
        field('Field', fieldInput, 'if.field', 'A field of the record (customer.name for a part), or tasks.<step>.decision'),
        el('fieldset', { class: 'b-rows' }, el('legend', {}, 'Go on only if the field…'), tests, el('span', { class: 'field-error', 'data-error-for': 'if' }), button('Add a test', () => addTest('equals', '').focus())),
        el('p', { class: 'muted' }, 'Numbers, true, false and null are read as such; anything else as text.'),
        field('Otherwise', selectInput(step, index, ['else'], choicesAt('condition', ['else']), { optional: true, labels: { end: 'end the run (succeeded)', fail: 'fail the run' } }), 'else'),
      ]
    },

    update(step, index) {
      const fields = (collectionOf() || { fields: [] }).fields
      const typeOf = (name) => (fields.find((f) => f.name === name) || {}).type
      return [
        rows({
          step, index, path: ['set'], legend: 'Set these fields', names: datalist(fields.map((f) => f.name)), keyLabel: 'Field', valueLabel: 'Value', template: true, addLabel: 'Add a field',
          // A text-like field of the schema keeps what is typed as text; otherwise numbers, true, false and null are read as such.
          readValue: (name, text) => (STRING_TYPES.includes(typeOf(name)) ? text : scalarOf(text)),
        }),
      ]
    },

    note: (step, index) => [
      field('Title', textInput(step, index, ['title'], { template: true }), 'title', 'Type {{ for a variable'),
      field('Content', textInput(step, index, ['content'], { template: true, multiline: true }), 'content'),
    ],

    http(step, index) {
      const body = el('textarea', { rows: 4, spellcheck: 'false' })
      body.value = step.body === undefined ? '' : JSON.stringify(step.body, null, 2)
      templated(body, index)
      bound(step, index, ['body'], body, (i) => {
        if (i.value.trim() === '') return undefined
        try {
          return JSON.parse(i.value)
        } catch {
          return i.value
        }
      })
      return [
        field('Method', selectInput(step, index, ['method'], choicesAt('http', ['method'])), 'method'),
        field('URL', textInput(step, index, ['url'], { template: true }), 'url', 'http:// or https://; variables only after the host'),
        rows({ step, index, path: ['headers'], legend: 'Headers', names: undefined, keyLabel: 'Header', valueLabel: 'Value', template: true, addLabel: 'Add a header', readValue: (_, text) => text }),
        field('Body (JSON, or text)', body, 'body'),
        field('Timeout (seconds)', numberInput(step, index, ['timeoutSeconds']), 'timeoutSeconds'),
        field('Retries', numberInput(step, index, ['retries']), 'retries'),
      ]
    },

    wait: (step, index) => [field('Seconds', numberInput(step, index, ['seconds'], { optional: false }), 'seconds', '60 is a minute, 3600 an hour, 86400 a day')],

    task(step, index) {
      const teams = datalist(DATA.teams)
      const users = datalist(DATA.users)
      const escalating = step.onTimeout === 'escalate'
      const onTimeout = selectInput(step, index, ['onTimeout'], choicesAt('task', ['onTimeout']), { optional: true })
      onTimeout.addEventListener('change', () => render())
      return [
        field('Title', textInput(step, index, ['title'], { template: true }), 'title', 'What is asked; type {{ for a variable'),
        el(
          'fieldset',
          { class: 'b-group' },
          el('legend', {}, 'Assignees'),
          field('Teams (comma-separated)', listInput(step, index, ['assignees', 'teams'], teams), 'assignees.teams'),
          field('Users (emails, comma-separated)', listInput(step, index, ['assignees', 'users'], users), 'assignees.users'),
          el('span', { class: 'field-error', 'data-error-for': 'assignees' }),
        ),
        field('Approvals needed', numberInput(step, index, ['approvals']), 'approvals'),
        field('The run’s user may decide', bound(step, index, ['allowRequester'], el('input', { type: 'checkbox', checked: step.allowRequester === true }), (i) => (i.checked ? true : undefined)), 'allowRequester'),
        formFields(step, index),
        dueIn(step, index),
        field('At the deadline', onTimeout, 'onTimeout'),
        escalating
          ? el(
              'fieldset',
              { class: 'b-group' },
              el('legend', {}, 'Escalate to'),
              field('Teams', listInput(step, index, ['escalateTo', 'teams'], teams), 'escalateTo.teams'),
              field('Users', listInput(step, index, ['escalateTo', 'users'], users), 'escalateTo.users'),
              el('span', { class: 'field-error', 'data-error-for': 'escalateTo' }),
            )
          : null,
        field('When rejected', selectInput(step, index, ['onReject'], choicesAt('task', ['onReject']), { optional: true, labels: { fail: 'fail the run', end: 'end the run', continue: 'go on' } }), 'onReject'),
      ]
    },
  }

  // A task's form fields: a name, a type, a label and whether it is required; other keywords of a field are kept.
  function formFields(step, index) {
    const container = el('div', { class: 'rows' })
    const rebuild = () => {
      const old = (step.form && step.form.properties) || {}
      const properties = {}
      const required = []
      for (const row of container.querySelectorAll('.row')) {
        const name = row.querySelector('.form-name').value.trim()
        if (!name) continue
        const kept = old[row.dataset.original] || {}
        const title = row.querySelector('.form-title').value
        const property = { ...kept, type: row.querySelector('select').value }
        if (title) property.title = title
        else delete property.title
        properties[name] = property
        row.dataset.original = name
        if (row.querySelector('input[type=checkbox]').checked) required.push(name)
      }
      if (Object.keys(properties).length === 0) delete step.form
      else step.form = { ...(step.form || {}), type: 'object', properties, ...(required.length > 0 ? { required } : {}) }
      if (step.form && required.length === 0) delete step.form.required
      write()
    }
    const addRow = (name, property, isRequired) => {
      const row = el('div', { class: 'row', 'data-original': name })
      const nameInput = el('input', { type: 'text', class: 'form-name', id: newId('f'), autocomplete: 'off', value: name, oninput: rebuild })
      const type = el('select', { id: newId('f'), onchange: rebuild }, FORM_TYPES.map((t) => el('option', { value: t, selected: (property.type || 'string') === t }, t)))
      const title = el('input', { type: 'text', class: 'form-title', id: newId('f'), autocomplete: 'off', value: property.title || '', oninput: rebuild })
      const required = el('input', { type: 'checkbox', id: newId('f'), checked: isRequired, onchange: rebuild })
      row.append(
        el('label', { for: nameInput.id }, 'Field'), nameInput,
        el('label', { for: type.id }, 'Type'), type,
        el('label', { for: title.id }, 'Label'), title,
        el('label', { for: required.id, class: 'check' }, required, ' required'),
        button('Remove', () => (row.remove(), rebuild()), { class: 'link', 'aria-label': `Remove form field ${name}`.trim() }),
      )
      container.append(row)
      return nameInput
    }
    const form = step.form || {}
    for (const [name, property] of Object.entries(form.properties || {})) addRow(name, property || {}, (form.required || []).includes(name))
    return el('fieldset', { class: 'b-rows' }, el('legend', {}, 'Form the decider fills in'), container, el('span', { class: 'field-error', 'data-error-for': 'form' }), button('Add a form field', () => addRow('', {}, false).focus()))
  }

  // A task's deadline as an amount of one unit (the largest that divides it).
  function dueIn(step, index) {
    const total = step.dueIn ? Object.entries(step.dueIn).reduce((sum, [unit, n]) => sum + (Number(n) || 0) * ((DUE_UNITS.find(([u]) => u === unit) || [0, 0])[1]), 0) : 0
    const [unit, size] = DUE_UNITS.find(([, s]) => total > 0 && total % s === 0) || ['days', 86400]
    const amount = el('input', { type: 'text', inputmode: 'numeric', size: 6, autocomplete: 'off', value: total > 0 ? String(total / size) : '' })
    const units = el('select', { 'aria-label': 'Unit of the deadline' }, DUE_UNITS.map(([u]) => el('option', { value: u, selected: u === unit }, u)))
    const update = () => {
      const n = amount.value.trim()
      if (n === '') delete step.dueIn
      else step.dueIn = { [units.value]: Number.isNaN(Number(n)) ? n : Number(n) }
      write()
    }
    amount.addEventListener('input', update)
    units.addEventListener('change', update)
    const wrapper = field('Deadline after it opens (empty: none)', amount, 'dueIn')
    wrapper.insertBefore(units, amount.nextSibling)
    return wrapper
  }

  // ── The cards ─────────────────────────────────────────────────────────────────
  const title = (step, index) => `Step ${index + 1}: ${step.type}${step.name ? ` “${step.name}”` : ''}`

  function move(index, by) {
    const steps = definition.steps
    const [step] = steps.splice(index, 1)
    steps.splice(index + by, 0, step)
    write()
    render(`.step-card[data-index="${index + by}"] [data-move="${by}"]`)
  }

  function insert(at) {
    const type = root.querySelector('#builder-type').value
    definition.steps.splice(at, 0, JSON.parse(JSON.stringify(DATA.templates[type])))
    write()
    render(`.step-card[data-index="${at}"] h3`)
  }

  function card(step, index) {
    if (!step || typeof step !== 'object' || Array.isArray(step)) return el('li', { class: 'step-card', 'data-index': index }, el('p', { class: 'muted' }, `Step ${index + 1} is not an object: edit it in the JSON tab.`))
    const count = definition.steps.length
    const known = step && Object.hasOwn(FORMS, step.type)
    const nameInput = textInput(step, index, ['name'], { optional: step.type !== 'task' })
    nameInput.addEventListener('input', () => (heading.textContent = title(step, index)))
    const heading = el('h3', { tabindex: '-1', id: newId('h') }, title(step, index))
    const tools = el(
      'div',
      { class: 'card-tools' },
      button('↑', () => move(index, -1), { 'aria-label': `Move step ${index + 1} up`, disabled: index === 0, 'data-move': '-1' }),
      button('↓', () => move(index, 1), { 'aria-label': `Move step ${index + 1} down`, disabled: index === count - 1, 'data-move': '1' }),
      button('Insert step above', () => insert(index), { 'aria-label': `Insert step above step ${index + 1}` }),
      button('Delete', () => (definition.steps.splice(index, 1), write(), render('#builder-add')), { class: 'danger', 'aria-label': `Delete step ${index + 1}` }),
    )
    return el(
      'li',
      { class: 'step-card', 'data-index': index, 'data-type': step && step.type, 'aria-labelledby': heading.id },
      el('div', { class: 'card-head' }, heading, tools),
      el('span', { class: 'field-error', 'data-error-for': '' }),
      known
        ? [field(step.type === 'task' ? 'Name (later steps read tasks.<name>)' : 'Name (optional)', nameInput, 'name'), ...FORMS[step.type](step, index)]
        : el('p', { class: 'muted' }, 'Edit this step in the JSON tab.'),
    )
  }

  function render(focus) {
    if (!definition) definition = parsed() || { collection: (DATA.collections[0] || {}).name || '', steps: [] }
    if (!Array.isArray(definition.steps)) definition.steps = []
    closeSuggestions()
    root.querySelectorAll('datalist').forEach((d) => d.remove())
    const collectionInput = el('select', {}, DATA.collections.map((c) => el('option', { value: c.name, selected: c.name === definition.collection }, c.name)))
    collectionInput.addEventListener('change', () => {
      definition.collection = collectionInput.value
      write()
      render()
    })
    const concurrency = numberInput(definition, -1, ['concurrency'])
    const top = el(
      'div',
      { class: 'builder-top' },
      field('Collection', collectionInput, 'collection'),
      field('At most this many runs at once (empty: no limit)', concurrency, 'concurrency'),
      el('span', { class: 'field-error', 'data-error-for': '' }),
    )
    const typeSelect = el('select', { id: 'builder-type' }, DATA.types.map((t) => el('option', { value: t }, t)))
    const add = el(
      'div',
      { class: 'builder-add' },
      el('label', { for: 'builder-type' }, 'New step type'),
      typeSelect,
      button('Add step at the end', () => insert(definition.steps.length), { id: 'builder-add' }),
    )
    root.replaceChildren(
      top,
      el('p', { class: 'muted' }, 'Choose the type of a new step, then add it at the end or insert it above a step.'),
      add,
      el('ol', { class: 'builder-steps' }, definition.steps.map(card)),
    )
    checkAll()
    const target = focus && root.querySelector(focus)
    if (target) target.focus()
  }

  // ── Tabs ──────────────────────────────────────────────────────────────────────
  function showTab(builder) {
    const value = builder ? parsed() : null
    if (builder && !value && textarea.value.trim() !== '') {
      // The builder edits a definition that parses: say why it cannot open, beside the JSON.
      form.querySelector('.editor-problems').replaceChildren(el('li', {}, 'Fix the JSON first: the builder opens a definition that parses.'))
      return
    }
    if (builder) definition = value
    tabBuilder.setAttribute('aria-selected', String(builder))
    tabJson.setAttribute('aria-selected', String(!builder))
    tabBuilder.tabIndex = builder ? 0 : -1
    tabJson.tabIndex = builder ? -1 : 0
    root.hidden = !builder
    panelJson.hidden = builder
    if (builder) render()
    else closeSuggestions()
    try {
      localStorage.setItem('trellis.editorTab', builder ? 'builder' : 'json')
    } catch {}
  }
  tabBuilder.addEventListener('click', () => showTab(true))
  tabJson.addEventListener('click', () => showTab(false))
  tabs.addEventListener('keydown', (event) => {
    if (event.key !== 'ArrowLeft' && event.key !== 'ArrowRight') return
    const builder = event.target === tabJson
    showTab(builder)
    ;(builder ? tabBuilder : tabJson).focus()
  })
  // A problem's "Line N" button (editor.js) selects its line in the JSON: from the builder, the JSON tab opens first.
  form.querySelector('#editor-problems').addEventListener('click', (event) => event.target.closest('button') && !root.hidden && showTab(false), true)
  // Enter in a builder field would publish: a field's Enter does nothing (the Publish button publishes).
  root.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && event.target instanceof HTMLInputElement) event.preventDefault()
  })

  // ── Dry run ───────────────────────────────────────────────────────────────────
  const result = form.querySelector('#dry-run-result')
  const OUTCOMES = { continue: 'goes on', end: 'ends the run', fail: 'fails the run', skipped: 'not reached' }
  const ENDINGS = { succeeded: 'the run would succeed', ended: 'the run would end early (succeeded)', failed: 'the run would fail' }

  async function runDry() {
    const recordId = form.querySelector('#dry-run-record').value.trim()
    if (recordId === '') return result.replaceChildren(el('p', { class: 'error' }, 'Record id: required'))
    const body = parsed()
    if (!body) return result.replaceChildren(el('p', { class: 'error' }, 'The definition is not valid JSON: fix it in the JSON tab first.'))
    result.replaceChildren(el('p', {}, 'Running…'))
    const response = await fetch(DATA.dryRun, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ definition: body, recordId }),
      credentials: 'same-origin',
    })
    const answer = await response.json().catch(() => ({}))
    if (!response.ok) {
      const details = answer.details || []
      showApiProblems(details)
      return result.replaceChildren(
        el('p', { class: 'error' }, answer.message || `${response.status} ${response.statusText}`),
        details.length > 0 ? el('ul', { class: 'error' }, details.map((d) => el('li', {}, `${d.field}: ${d.message}`))) : null,
      )
    }
    showApiProblems([])
    result.replaceChildren(
      el('p', {}, el('strong', {}, `Dry run on ${answer.recordId}: ${ENDINGS[answer.outcome]}.`), ' Nothing was written and nothing was called.'),
      el(
        'ol',
        { class: 'dry-run-steps' },
        answer.steps.map((step) =>
          el(
            'li',
            { class: `dry-${step.outcome}` },
            el('strong', {}, step.name), ` (${step.type}) — ${OUTCOMES[step.outcome]}: ${step.summary}`,
            Object.keys(step.would).length > 0 ? el('details', {}, el('summary', {}, 'Details'), el('pre', { tabindex: '0' }, JSON.stringify(step.would, null, 2))) : null,
          ),
        ),
      ),
    )
  }
  form.querySelector('[data-dry-run]').addEventListener('click', (event) => {
    const trigger = event.currentTarget
    trigger.disabled = true
    runDry()
      .catch((error) => result.replaceChildren(el('p', { class: 'error' }, `Request failed: ${error.message}`)))
      .finally(() => (trigger.disabled = false))
  })
  form.querySelector('#dry-run-record').addEventListener('keydown', (event) => {
    if (event.key !== 'Enter') return
    event.preventDefault()
    form.querySelector('[data-dry-run]').click()
  })

  tabs.hidden = false
  dryRun.hidden = false
  let remembered = null
  try {
    remembered = localStorage.getItem('trellis.editorTab')
  } catch {}
  if (remembered === 'builder') showTab(true)
})()
