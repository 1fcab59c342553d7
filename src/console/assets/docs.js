// Everything is served by this Trellis: the document, the UI, no validator badge (it would call out).
window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  defaultModelsExpandDepth: 0,
})
