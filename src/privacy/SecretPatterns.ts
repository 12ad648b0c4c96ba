/**
 * The secrets the privacy filter knows by shape: cloud and SaaS keys and tokens, private key
 * blocks, JWTs, passwords in connection strings and `password=`-style assignments.
 *
 * Every pattern is anchored on something specific (a vendor prefix, a PEM armour line, a URL's
 * `user:password@`, a secret-sounding key name followed by `=` or `:`), never on entropy alone,
 * so ids, cursors and hashes that only look random are left alone. Every pattern is linear: no
 * nested quantifiers over overlapping classes, and every repetition is bounded, so a hostile
 * string cannot make the filter backtrack for long (checked by test/privacy/PrivacyFilter.test.ts).
 * A kind may redact only part of its match (`keep`): an assignment keeps its key name and quotes,
 * a connection string keeps its scheme, user and host.
 */

/** One kind of secret. */
export interface SecretPattern {
  /** The kind, shown in the redaction marker and counted in health. */
  readonly kind: string
  readonly description: string
  /** Global regular expression finding the secret. */
  readonly regex: RegExp
  /**
   * The groups kept verbatim around the redacted part: `prefix` before it, `suffix` after it.
   * Without them the whole match is redacted.
   */
  readonly keepGroups?: boolean
  /** Matches that are not secrets after all (placeholders, type names). */
  readonly ignore?: (secret: string) => boolean
  /**
   * Text every match of `regex` holds: a string without it is not scanned with `regex`. The
   * patterns anchored on a bounded run before their keyword (a key name's prefix, a URL's scheme)
   * try that run at every word of a string, 4 µs a string for all of them; most strings hold no
   * keyword at all.
   */
  readonly hint?: RegExp
}

/** The marker that replaces a redacted secret. */
export const redactionMarker = (kind: string): string => `[REDACTED:${kind}]`

/** Values of `password=` assignments that are placeholders, not secrets. */
const placeholderValues = new Set([
  "string",
  "number",
  "boolean",
  "null",
  "none",
  "nil",
  "undefined",
  "true",
  "false",
  "required",
  "optional",
  "redacted",
  "changeme",
  "password",
  "secret",
  "token",
  "xxx",
  "xxxx",
  "xxxxxx",
  "***",
  "******",
  "...",
])

const isPlaceholder = (value: string): boolean => {
  const lower = value.toLowerCase()
  return (
    value.length < 3 ||
    placeholderValues.has(lower) ||
    value.startsWith("[REDACTED:") ||
    /^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$/.test(value) || // $VAR, ${VAR}
    /^<[^<>]{1,64}>$/.test(value) || // <your-password>
    /^\{\{[^{}]{1,64}\}\}$/.test(value) || // {{ secret }}
    /^(?:process\.env|os\.environ|env)\b/.test(value) ||
    /^\*+$/.test(value) ||
    /^\d{1,5}$/.test(value) // counts and sizes, e.g. token: 500
  )
}

/** Secret-sounding key names of an assignment (any prefix: `DB_PASSWORD`, `x-api-key`, `github_token`). */
const secretKeyName =
  "[A-Za-z0-9_.-]{0,64}?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|client[_-]?secret|auth[_-]?token|credentials?)"
/** What every one of `secretKeyName`'s names holds (`pass` of `passwd`, `key` of `api_key`, ...). */
const secretKeyNameHint = /pass|pwd|secret|token|key|credential/i

/** The quote that may close the key name: `"`, `'`, or an escaped one inside a JSON string (`\"`). */
const closingQuote = `(?:\\\\?["'])?`

/**
 * The built-in kinds, in the order they are applied: whole blocks and specific vendor shapes
 * first, the generic assignment last (so `API_KEY=sk-...` is reported as the vendor's key).
 */
export const builtinSecretPatterns: ReadonlyArray<SecretPattern> = [
  {
    kind: "private-key",
    // The body is armour characters only (base64, headers, line breaks — also as \n inside JSON), so a
    // match never runs across a quote into the next field of a JSON text; and it stops at the next
    // "-----", so a text of many BEGIN lines is scanned once, not once per line.
    description: "PEM/OpenSSH/PGP private key blocks (BEGIN ... PRIVATE KEY ... END)",
    regex:
      /-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:,.\s]|-(?!----)|\\[nr]){0,65536}?-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----/g,
  },
  {
    kind: "private-key",
    description: "a private key block cut off before its END line",
    regex: /-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:,.\s-]|\\[nr]){0,65536}/g,
  },
  {
    kind: "jwt",
    description: "JSON Web Tokens (eyJ... . eyJ... . signature)",
    regex: /\beyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}/g,
  },
  {
    kind: "aws-access-key",
    description: "AWS access key ids (AKIA..., ASIA...)",
    regex: /\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b/g,
  },
  {
    kind: "github-token",
    description: "GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
    regex: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b/g,
  },
  { kind: "gitlab-token", description: "GitLab tokens (glpat-...)", regex: /\bglpat-[A-Za-z0-9_-]{20,255}/g },
  {
    kind: "slack-token",
    description: "Slack tokens (xoxb-, xoxp-, xoxa-, ...) and incoming webhook URLs",
    regex:
      /\bxox[abposre]-[A-Za-z0-9-]{10,255}|https:\/\/hooks\.slack\.com\/services\/[A-Za-z0-9]{1,32}\/[A-Za-z0-9]{1,32}\/[A-Za-z0-9]{1,64}/g,
  },
  {
    kind: "anthropic-key",
    description: "Anthropic API keys (sk-ant-...)",
    regex: /\bsk-ant-[A-Za-z0-9_-]{20,255}/g,
  },
  {
    kind: "openai-key",
    description: "OpenAI API keys (sk-..., sk-proj-...)",
    regex: /\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,255}/g,
  },
  {
    kind: "stripe-key",
    description: "Stripe secret and restricted keys (sk_live_, rk_test_, ...)",
    regex: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}/g,
  },
  { kind: "google-api-key", description: "Google API keys (AIza...)", regex: /\bAIza[0-9A-Za-z_-]{35}/g },
  { kind: "npm-token", description: "npm access tokens (npm_...)", regex: /\bnpm_[A-Za-z0-9]{36}\b/g },
  {
    kind: "pypi-token",
    description: "PyPI API tokens (pypi-AgEIcHlwaS5vcmc...)",
    regex: /\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,512}/g,
  },
  { kind: "huggingface-token", description: "Hugging Face tokens (hf_...)", regex: /\bhf_[A-Za-z0-9]{34,64}\b/g },
  {
    kind: "sendgrid-key",
    description: "SendGrid API keys (SG.xxx.yyy)",
    regex: /\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b/g,
  },
  {
    kind: "digitalocean-token",
    description: "DigitalOcean tokens (dop_v1_...)",
    regex: /\bdo[opr]_v1_[a-f0-9]{64}\b/g,
  },
  {
    kind: "connection-string",
    description: "the password of a URL or connection string (scheme://user:password@host)",
    regex:
      /(?<prefix>\b[A-Za-z][A-Za-z0-9+.-]{1,30}:\/\/[^\s:/@"'<>]{0,128}:)(?<secret>[^\s@"'<>/]{1,256})(?<suffix>@)/g,
    keepGroups: true,
    ignore: isPlaceholder,
    hint: /:\/\//,
  },
  {
    kind: "bearer-token",
    description: "bearer credentials in Authorization headers (Bearer ...)",
    regex: /(?<prefix>\b[Bb]earer\s{1,8})(?<secret>[A-Za-z0-9._~+/=-]{16,4096})(?<suffix>)/g,
    keepGroups: true,
    hint: /earer\s/,
  },
  {
    kind: "password",
    description: 'quoted values assigned to secret-sounding names: password="...", "token": "..."',
    regex: new RegExp(
      `(?<prefix>\\b${secretKeyName}${closingQuote}\\s{0,8}[:=]\\s{0,8}(?<quote>["'\`]))(?<secret>(?:\\\\.|(?!\\k<quote>)[^\\n\\\\]){1,512})(?<suffix>\\k<quote>)`,
      "gi",
    ),
    keepGroups: true,
    ignore: isPlaceholder,
    hint: secretKeyNameHint,
  },
  {
    kind: "password",
    description: 'the same inside a JSON string of JSON (metadata_json): \\"password\\": \\"...\\"',
    regex: new RegExp(
      `(?<prefix>\\b${secretKeyName}${closingQuote}\\s{0,8}[:=]\\s{0,8}(?<quote>\\\\["']))(?<secret>(?:[^\\n\\\\]|\\\\[^"'\\n]){1,512})(?<suffix>\\k<quote>)`,
      "gi",
    ),
    keepGroups: true,
    ignore: isPlaceholder,
    hint: secretKeyNameHint,
  },
  {
    kind: "password",
    description: "bare values assigned to secret-sounding names: password=..., API_KEY: ...",
    regex: new RegExp(
      `(?<prefix>\\b${secretKeyName}${closingQuote}\\s{0,8}[:=]\\s{0,8})(?<secret>[^\\s"'\`,;&)}\\]<>\\\\]{1,512})(?<suffix>)`,
      "gi",
    ),
    keepGroups: true,
    ignore: isPlaceholder,
    hint: secretKeyNameHint,
  },
]
