// Files imported `with { type: 'text' }`: Bun embeds their text in the binary.
declare module 'swagger-ui-dist/swagger-ui-bundle.js' {
  const text: string
  export default text
}
declare module 'swagger-ui-dist/swagger-ui.css' {
  const text: string
  export default text
}
declare module '*.css' {
  const text: string
  export default text
}
declare module '*/console.js' {
  const text: string
  export default text
}
declare module '*/setup.js' {
  const text: string
  export default text
}
declare module '*/docs.js' {
  const text: string
  export default text
}
declare module '*/editor.js' {
  const text: string
  export default text
}
declare module '*/live.js' {
  const text: string
  export default text
}
declare module '*/records-import.js' {
  const text: string
  export default text
}
declare module '*/builder.js' {
  const text: string
  export default text
}
