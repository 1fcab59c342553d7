// The first-start page's form (/setup): create the first administrator with the one-time token of the link.
const token = new URLSearchParams(location.search).get('token') || ''
const form = document.getElementById('setup')
const message = document.getElementById('message')
form.addEventListener('submit', async (event) => {
  event.preventDefault()
  const data = Object.fromEntries(new FormData(form))
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
    message.className = 'error'
    message.textContent = body.message || 'Setup failed (' + response.status + ')'
  }
})
