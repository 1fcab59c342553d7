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
    default: return raw === '' && input.dataset.optional !== undefined ? undefined : input.value
  }
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

function formJson(form) {
  const body = {}
  for (const input of form.querySelectorAll('input[name], select[name], textarea[name]')) {
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
  return body
}

function showError(form, message) {
  const slot = form.querySelector('.form-error')
  if (slot) slot.textContent = message
  else alert(message)
}

async function submitApiForm(form) {
  if (form.dataset.confirm && !confirm(form.dataset.confirm)) return
  const method = form.dataset.method || 'POST'
  const button = form.querySelector('button[type=submit], button:not([type])')
  if (button) button.disabled = true
  showError(form, '')
  try {
    const response = await fetch(form.getAttribute('action'), {
      method,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: method === 'GET' ? undefined : JSON.stringify(formJson(form)),
      credentials: 'same-origin',
    })
    const text = await response.text()
    const body = text ? JSON.parse(text) : {}
    if (!response.ok) {
      showError(form, body.message || `${response.status} ${response.statusText}`)
      return
    }
    if (form.dataset.show) {
      const target = document.querySelector(form.dataset.show)
      target.querySelector('.value').textContent = body[form.dataset.showField || 'value']
      target.hidden = false
      form.reset()
      return
    }
    const next = form.dataset.next
    if (next) location.assign(next.replace('{runId}', encodeURIComponent(body.runId || '')))
    else location.reload()
  } catch (error) {
    showError(form, `Request failed: ${error.message}`)
  } finally {
    if (button) button.disabled = false
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
  submitApiForm(form)
})

document.addEventListener('click', async (event) => {
  const button = event.target.closest('button[data-copy]')
  if (!button) return
  const source = document.querySelector(button.dataset.copy)
  const copied = await copyText(source.textContent)
  if (!copied) window.getSelection().selectAllChildren(source)
  button.textContent = copied ? 'Copied' : 'Selected: press Ctrl+C'
})
