/**
 * The privacy filter as a function: every kind of the corpus is redacted and reported, innocent
 * technical strings pass unchanged, `<private>` spans (nested, unclosed, any case, with attributes
 * like `<private reason="...">`) are dropped,
 * the filter is idempotent and never slow on hostile input, it walks keys and values of nested
 * values without being fooled by `__proto__`, and config.json patterns and switches take effect.
 */
import fc from "fast-check"
import { afterEach, assert, describe, it } from "vitest"
import {
  builtinKinds,
  configurePrivacy,
  dropPrivateSpans,
  filterPrivate,
  filterText,
  nestingDepthMax,
  privacyStats,
  resetPrivacyStats,
} from "../../src/privacy/PrivacyFilter.ts"
import { builtinSecretPatterns } from "../../src/privacy/SecretPatterns.ts"
import { parseDataDirConfig } from "../../src/stores/datadir/DataDirConfig.ts"
import { corpusText, innocentTexts, secretCorpus } from "./corpus.ts"

afterEach(() => {
  configurePrivacy({ disabledKinds: [], customPatterns: [] })
  resetPrivacyStats()
})

describe("secrets", () => {
  for (const secret of secretCorpus)
    it(`${secret.kind}: ${secret.text.slice(0, 40).replace(/\n/g, " ")}...`, () => {
      resetPrivacyStats()
      const filtered = filterText(secret.text)
      assert.notInclude(filtered, secret.needle)
      if (secret.kind === "private-span") assert.isAtLeast(privacyStats().privateSpansDropped, 1)
      else {
        assert.include(filtered, `[REDACTED:${secret.kind}]`)
        assert.isAtLeast(privacyStats().redactedByKind[secret.kind] ?? 0, 1)
      }
    })

  it("every secret of the corpus, in one text and inside JSON strings, is gone", () => {
    const text = corpusText()
    const filtered = filterText(text)
    const inJson = filterText(JSON.stringify({ note: text }))
    for (const secret of secretCorpus) {
      assert.notInclude(filtered, secret.needle)
      assert.notInclude(inJson, secret.needle)
    }
    assert.doesNotThrow(() => JSON.parse(inJson), "redaction keeps JSON text parseable")
  })

  it("an assignment keeps its name and quotes; a URL keeps its user and host", () => {
    assert.strictEqual(filterText('{"password":"hunter2!x"}'), '{"password":"[REDACTED:password]"}')
    assert.strictEqual(
      filterText("postgres://app:pw123456@db:5432/x"),
      "postgres://app:[REDACTED:connection-string]@db:5432/x",
    )
  })

  for (const text of innocentTexts)
    it(`leaves alone: ${text.slice(0, 50)}`, () => assert.strictEqual(filterText(text), text))
})

/** Any `<private...>` or `</private...>` tag (attributes, spaces), as the filter reads them. */
const privateTag = /<\/?private(?=[\s>])/i

describe("<private> spans", () => {
  it("drops spans, nested spans, spans in any case, and an unclosed span to the end", () => {
    assert.deepStrictEqual(dropPrivateSpans("a <private>b</private> c"), { text: "a  c", spans: 1 })
    assert.deepStrictEqual(dropPrivateSpans("a<Private>b<private>c</private>d</PRIVATE>e"), { text: "ae", spans: 1 })
    assert.deepStrictEqual(dropPrivateSpans("keep <private>drop all of this"), { text: "keep ", spans: 1 })
    assert.deepStrictEqual(dropPrivateSpans("stray </private> stays"), { text: "stray </private> stays", spans: 0 })
    assert.deepStrictEqual(dropPrivateSpans("<private>1</private>x<private>2</private>"), { text: "x", spans: 2 })
  })

  it('a tag with attributes or spaces is a tag: <private reason="..."> is dropped like <private>', () => {
    assert.deepStrictEqual(dropPrivateSpans('a <private reason="launch">the date</private> c'), {
      text: "a  c",
      spans: 1,
    })
    assert.deepStrictEqual(dropPrivateSpans("a <PRIVATE\n  data-x='1 > 0'>b</private > c"), { text: "a  c", spans: 1 })
    assert.deepStrictEqual(dropPrivateSpans('x<private a="1"><private b>y</private>z</private>w'), {
      text: "xw",
      spans: 1,
    })
    assert.deepStrictEqual(dropPrivateSpans('keep <private reason="x">drop all of this'), { text: "keep ", spans: 1 })
    // An opening tag that never closes hides the rest too: a cut-off tag must not leak what follows.
    assert.deepStrictEqual(dropPrivateSpans('keep <private reason="unfinished secret'), { text: "keep ", spans: 1 })
    // Other tags are text.
    for (const text of ["<privateer>x</privateer>", "<private-notes>x", "<private/>x", "a </privately> b"])
      assert.deepStrictEqual(dropPrivateSpans(text), { text, spans: 0 })
  })

  it("nothing between the tags survives, whatever the text", () => {
    fc.assert(
      fc.property(
        fc.string(),
        fc.string(),
        fc.string().filter((s) => !privateTag.test(s)),
        (before, after, hidden) => {
          fc.pre(!privateTag.test(before + after) && hidden.length > 3)
          const out = dropPrivateSpans(`${before}<private>${hidden}</private>${after}`).text
          assert.strictEqual(out, before + after)
        },
      ),
    )
  })
})

describe("the filter as a whole", () => {
  /** Pieces of texts: every secret and innocent text of the corpus, and `more`. */
  const corpusFragments = (...more: Array<string>) =>
    fc.constantFrom(...secretCorpus.map((secret) => secret.text), ...innocentTexts, ...more)

  it("is idempotent", () => {
    const fragments = corpusFragments(" ", "\n", "<private>", "</private>")
    fc.assert(
      fc.property(fc.array(fc.oneof(fragments, fc.string()), { maxLength: 8 }), (parts) => {
        const once = filterText(parts.join(""))
        assert.strictEqual(filterText(once), once)
      }),
      { numRuns: 300 },
    )
  })

  it("scans a text with a hinted pattern only when it holds the hint: the hint is in every text the pattern matches", () => {
    const hinted = builtinSecretPatterns.filter((pattern) => pattern.hint !== undefined)
    assert.includeMembers([...new Set(hinted.map((pattern) => pattern.kind))], ["password", "connection-string"])
    // Key names in any case, with the prefixes and separators the patterns allow, and what follows.
    const fragments = corpusFragments(
      "PassWord",
      "DB_PASSWD",
      "x-Api-Key",
      "apikey",
      "ACCESS_KEY",
      "account-key",
      "Private_Key",
      "client-secret",
      "AUTH_TOKEN",
      "credentials",
      "pwd",
      "passphrase",
      "Bearer",
      "bearer\t",
      "postgres://",
      "user:",
      "@host",
      '"',
      "'",
      '\\"',
      ":",
      "=",
      " ",
      "hunter2-s3cret-value",
    )
    fc.assert(
      fc.property(fc.array(fc.oneof(fragments, fc.string()), { maxLength: 10 }), (parts) => {
        const text = parts.join("")
        for (const pattern of hinted) {
          pattern.regex.lastIndex = 0
          if (pattern.regex.test(text)) assert.isTrue(pattern.hint!.test(text), `${pattern.description}: ${text}`)
        }
      }),
      { numRuns: 2000 },
    )
  })

  it("filters every string and key of a nested value, without changing its shape or its input", () => {
    const secret = secretCorpus[0]!
    const input = JSON.parse(
      JSON.stringify({ a: [secret.text, 1, true, null, { [secret.text]: { deep: [secret.text] } }], __proto__x: 2 }),
    )
    input.__proto__literal = undefined
    const withProto = JSON.parse(`{"__proto__": {"polluted": "${secret.needle}"}, "n": 3}`)
    const filtered = filterPrivate(input) as Record<string, unknown>
    assert.notInclude(JSON.stringify(filtered), secret.needle)
    assert.include(JSON.stringify(input), secret.needle, "the input is not modified")
    assert.strictEqual((filtered.a as Array<unknown>)[1], 1)
    const protoFiltered = filterPrivate(withProto) as Record<string, unknown>
    assert.isTrue(Object.hasOwn(protoFiltered, "__proto__"), "a __proto__ key stays a key")
    assert.strictEqual(Object.getPrototypeOf(protoFiltered), Object.prototype)
    assert.notInclude(JSON.stringify(protoFiltered), secret.needle)
    assert.isUndefined(({} as Record<string, unknown>).polluted)
  })

  it("gives back a JSON value with nothing to redact as it is, and copies only what it changes", () => {
    // The filter as it was before it copied on change, the reference for the values it returns.
    const copyAll = (value: unknown, depth: number): unknown => {
      if (typeof value === "string") return filterText(value)
      if (value === null || typeof value !== "object") return value
      if (depth >= nestingDepthMax) return "[REDACTED:too-deep]"
      if (Array.isArray(value)) return value.map((item) => copyAll(item, depth + 1))
      const out: Record<string, unknown> = {}
      for (const [key, item] of Object.entries(value))
        Object.defineProperty(out, filterText(key), {
          value: copyAll(item, depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        })
      return out
    }
    const secrets = fc.constantFrom(...secretCorpus.map((secret) => secret.text))
    const leaf = fc.oneof(fc.string(), secrets, fc.integer(), fc.boolean(), fc.constant(null))
    const key = fc.oneof(fc.string(), secrets, fc.constant("__proto__"))
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        leaf,
        fc.array(tie("value"), { maxLength: 4 }),
        // Parsed from JSON, as arguments arrive: a "__proto__" key is then an own key.
        fc
          .array(fc.tuple(key, tie("value")), { maxLength: 4 })
          .map((entries) => JSON.parse(JSON.stringify(Object.fromEntries(entries))) as unknown),
      ),
    }))
    fc.assert(
      fc.property(value, (input) => {
        const before = JSON.stringify(input)
        const filtered = filterPrivate(input)
        assert.deepStrictEqual(filtered, copyAll(input, 0))
        assert.strictEqual(JSON.stringify(input), before, "the input is not modified")
        if (JSON.stringify(filtered) === before) assert.strictEqual(filtered, input, "nothing changed: no copy")
      }),
      { numRuns: 500 },
    )
    const untouched = { entities: [{ name: "a", entityType: "b", observations: ["c", "d"] }] }
    assert.strictEqual(filterPrivate(untouched), untouched)
    const secret = secretCorpus[0]!
    const touched = { entities: [{ name: "a", observations: ["c", secret.text] }], other: { kept: ["x"] } }
    const filtered = filterPrivate(touched) as typeof touched
    assert.notStrictEqual(filtered, touched)
    assert.notInclude(JSON.stringify(filtered), secret.needle)
    assert.include(JSON.stringify(touched), secret.needle, "the input is not modified")
    assert.strictEqual(filtered.other, touched.other, "an untouched branch is shared, not copied")
  })

  it("replaces values nested deeper than the limit instead of walking them", () => {
    let deep: unknown = "AKIAZ3MX7QH2K4PLW9TB"
    for (let depth = 0; depth < nestingDepthMax + 10; depth++) deep = [deep]
    const filtered = JSON.stringify(filterPrivate(deep))
    assert.notInclude(filtered, "AKIAZ3MX7QH2K4PLW9TB")
    assert.include(filtered, "[REDACTED:too-deep]")
  })

  it("finishes hostile input in time proportional to its length (no catastrophic backtracking)", () => {
    const hostile = [
      "-----BEGIN ".repeat(20_000),
      "-----BEGIN RSA PRIVATE KEY-----\n".repeat(30_000),
      `-----BEGIN RSA PRIVATE KEY-----\n${"QUJD".repeat(250_000)}`,
      `${"password=".repeat(30_000)}x`,
      `postgres://${"a:".repeat(50_000)}`,
      `eyJ${"a".repeat(100_000)}.eyJ`,
      `${"A ".repeat(50_000)}PRIVATE`,
      "<private>".repeat(50_000),
      '<private a="'.repeat(50_000),
      "<private ".repeat(50_000),
      `<private${" ".repeat(200_000)}`,
      `${"x".repeat(200_000)}@`,
      `Bearer ${"a".repeat(100_000)}!`,
    ]
    // Catastrophic backtracking on inputs this long would not finish within the test's timeout;
    // each must finish, and its cost grow with its length: the same pattern at twice the length
    // takes at most a few times longer (linear is 2×, exponential is unbounded). Times are
    // compared side by side in one run, never against a fixed bound.
    const cost = (text: string) => {
      const started = performance.now()
      filterText(text)
      return performance.now() - started
    }
    for (const text of hostile) {
      const half = text.slice(0, Math.floor(text.length / 2))
      const halfMs = Math.min(cost(half), cost(half))
      const wholeMs = Math.min(cost(text), cost(text))
      assert.isBelow(
        wholeMs,
        8 * halfMs + 50,
        `${text.slice(0, 30)}…: ${wholeMs.toFixed(0)} ms, half of it ${halfMs.toFixed(0)} ms`,
      )
    }
  })

  it("counts what it did", () => {
    resetPrivacyStats()
    filterPrivate({ a: "AKIAZ3MX7QH2K4PLW9TB", b: "<private>x</private>", c: "plain" })
    const stats = privacyStats()
    assert.strictEqual(stats.stringsScanned, 6) // three keys, three values
    assert.strictEqual(stats.stringsChanged, 2)
    assert.strictEqual(stats.privateSpansDropped, 1)
    assert.deepStrictEqual(stats.redactedByKind, { "aws-access-key": 1 })
    assert.strictEqual(stats.secretsRedacted, 1)
  })
})

describe("configuration (config.json privacy section)", () => {
  it("custom patterns redact under their own name; disabled kinds pass", () => {
    const config = parseDataDirConfig(
      "/d/config.json",
      JSON.stringify({
        privacy: { disable: ["jwt"], patterns: [{ name: "acme-ticket", regex: "ACME-[0-9]{6}", flags: "i" }] },
      }),
    )
    assert.strictEqual(config._tag, "Success")
    if (config._tag !== "Success") return
    configurePrivacy(config.success.privacy)
    assert.strictEqual(filterText("see acme-123456 now"), "see [REDACTED:acme-ticket] now")
    const jwt = secretCorpus.find((secret) => secret.kind === "jwt")!
    assert.include(filterText(jwt.text), jwt.needle, "jwt is switched off")
    assert.notInclude(filterText("AKIAZ3MX7QH2K4PLW9TB"), "AKIAZ3MX7QH2K4PLW9TB", "the others still work")
  })

  it("refuses unknown keys, unknown kinds, bad patterns and patterns matching nothing at all", () => {
    const bad = [
      [{ privacy: { patterns: [{ name: "x", regex: "(" }] } }, 'pattern "x"'],
      [{ privacy: { patterns: [{ name: "x", regex: "a*" }] } }, "matches the empty string"],
      [{ privacy: { disable: ["no-such-kind"] } }, "unknown kind"],
      [{ privcy: {} }, "privcy"],
      [{ privacy: { patterns: [{ name: "Bad Name", regex: "x" }] } }, "kind name"],
    ] as const
    for (const [file, expected] of bad) {
      const result = parseDataDirConfig("/d/config.json", JSON.stringify(file))
      assert.strictEqual(result._tag, "Failure", JSON.stringify(file))
      if (result._tag === "Failure") assert.include(result.failure, expected)
    }
    assert.strictEqual(parseDataDirConfig("/d/config.json", "{ nope")._tag, "Failure")
  })

  it("lists every built-in kind the corpus exercises", () => {
    for (const secret of secretCorpus) if (secret.kind !== "private-span") assert.include(builtinKinds, secret.kind)
  })
})
