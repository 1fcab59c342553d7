// The first-start page's form (/setup): create the first administrator with the one-time token of the link.
const token = new URLSearchParams(location.search).get('token') || ''
const form = document.getElementById('setup')
const message = document.getElementById('message')
// A used or unknown link's page has no form.
if (form) form.addEventListener('submit', async (event) => {
  event.preventDefault()
  const data = Object.fromEntries(new FormData(form))
  // Hashing the password takes a moment or two: the button says it is working, and a second click sends nothing.
  const button = form.querySelector('button[type=submit]')
  button.disabled = true
  button.textContent = 'Creating the administrator…'
  form.setAttribute('aria-busy', 'true')
  message.className = ''
  message.textContent = ''
  const response = await fetch('/setup', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, ...data }),
  })
  const body = await response.json().catch(() => ({}))
  if (response.ok) {
    form.remove()
    message.className = 'ok'
    message.textContent = 'Administrator ' + body.user.email + ' created. '
    const signIn = document.createElement('a')
    signIn.href = '/login'
    signIn.textContent = 'Sign in to the console'
    message.append(signIn)
    history.replaceState(null, '', '/setup')
  } else {
    button.disabled = false
    button.textContent = 'Create administrator'
    form.removeAttribute('aria-busy')
    message.className = 'error'
    message.textContent = body.message || 'Setup failed (' + response.status + ')'
  }
})
