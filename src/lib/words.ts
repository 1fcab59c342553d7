/** English for messages built from names of things. */

/** "an environment", "a team": the article a noun takes (by its first letter, enough for this project's nouns). */
export const withArticle = (noun: string) => `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`
