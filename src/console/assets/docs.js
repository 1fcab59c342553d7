// Everything is served by this Trellis: the document, the UI, no validator badge (it would call out).
// No deep links: they put a link inside each operation's toggle button, a control within a control (axe
// nested-interactive). What Swagger UI draws later is mended as it appears: the servers list gets the name its label
// does not give it (axe select-name), and each scrolling code box a place in the tab order, so that a keyboard can
// scroll it (axe scrollable-region-focusable).
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: false,
  validatorUrl: null,
  defaultModelsExpandDepth: 0,
})

function mendAccessibility(root) {
  const servers = root.querySelector('#servers:not([aria-label])')
  if (servers) servers.setAttribute('aria-label', 'Server')
  for (const box of root.querySelectorAll('pre:not([tabindex]), .highlight-code:not([tabindex])')) box.setAttribute('tabindex', '0')
}

const reference = document.getElementById('swagger-ui')
new MutationObserver(() => mendAccessibility(reference)).observe(reference, { childList: true, subtree: true })
