/**
 * A corpus of real-looking secrets (made up: none is a live credential), each with the needle that
 * must never reach a store and the kind the filter should report. Shared by the filter's unit
 * tests and the end-to-end corpus test.
 */

/** One secret, the text it appears in, and what must not survive. */
export interface CorpusSecret {
  readonly kind: string
  /** The text as a user or agent would write it. */
  readonly text: string
  /** A part of the secret that must not appear anywhere after filtering. */
  readonly needle: string
}

const privateKeyBody = [
  "MIIEowIBAAKCAQEAx3v9sQ2Lr7aZmC0kPpXw4XxZr5d8uJk2m3n4b5v6c7x8z9a0",
  "b1c2d3e4f5g6h7i8j9k0l1m2n3o4p5q6r7s8t9u0v1w2x3y4z5A6B7C8D9E0F1G2",
  "H3I4J5K6L7M8N9O0P1Q2R3S4T5U6V7W8X9Y0Z1a2b3c4d5e6f7g8h9i0j1k2l3m4",
]

export const secretCorpus: ReadonlyArray<CorpusSecret> = [
  {
    kind: "aws-access-key",
    text: "the deploy user is AKIAZ3MX7QH2K4PLW9TB in us-east-1",
    needle: "AKIAZ3MX7QH2K4PLW9TB",
  },
  {
    kind: "password",
    text: 'aws_secret_access_key = "Zq8vR2mK5nL0pX7tY3wB9cD4fG6hJ1kM8nP2qR5s"',
    needle: "Zq8vR2mK5nL0pX7tY3wB9cD4fG6hJ1kM8nP2qR5s",
  },
  {
    kind: "github-token",
    text: "git remote set-url origin https://x:ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o@github.com/acme/app",
    needle: "ghp_R8sT2uV4wX6yZ8aB0cD2eF4gH6iJ8kL0mN2o",
  },
  {
    kind: "github-token",
    text: "fine-grained: github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF0123456789abcdef",
    needle: "github_pat_11ABCDEFG0123456789_abcdef",
  },
  {
    kind: "gitlab-token",
    text: "CI uses glpat-Xy7zW3vU9tS1rQ5pO2nM for the registry",
    needle: "glpat-Xy7zW3vU9tS1rQ5pO2nM",
  },
  {
    kind: "slack-token",
    text: "SLACK_BOT=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    needle: "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
  },
  {
    kind: "slack-token",
    text: "alerts go to https://hooks.slack.com/services/T0ABCDEFG/B0HIJKLMN/ZyXwVuTsRqPoNmLkJiHgFeDc",
    needle: "ZyXwVuTsRqPoNmLkJiHgFeDc",
  },
  {
    kind: "openai-key",
    text: "export OPENAI_API_KEY=sk-proj-Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7Q",
    needle: "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7Q",
  },
  {
    kind: "anthropic-key",
    text: "key sk-ant-api03-Mn8Bv6Cx4Za2Sd0Fg8Hj6Kl4Qw2Er0Ty8Ui6Op4As2-Df0GhJkAA for the bot",
    needle: "Mn8Bv6Cx4Za2Sd0Fg8Hj6Kl4Qw2Er0Ty8Ui6Op4As2",
  },
  {
    kind: "stripe-key",
    text: "billing: sk_live_51HqJKLmNoPqRsTuVwXyZa0B1c2D3",
    needle: "sk_live_51HqJKLmNoPqRsTuVwXyZa0B1c2D3",
  },
  {
    kind: "google-api-key",
    text: "maps key AIzaSyD3f4G5h6J7k8L9m0N1p2Q3r4S5t6U7v8W",
    needle: "AIzaSyD3f4G5h6J7k8L9m0N1p2Q3r4S5t6U7v8W",
  },
  {
    kind: "npm-token",
    text: "//registry.npmjs.org/:_authToken=npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    needle: "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
  },
  {
    kind: "pypi-token",
    text: "twine password pypi-AgEIcHlwaS5vcmcCJGFiY2RlZjAxLTIzNDUtNjc4OS1hYmNkLWVmMDEyMzQ1Njc4OQACKlsz",
    needle: "CJGFiY2RlZjAxLTIzNDUtNjc4OS1hYmNkLWVmMDEyMzQ1Njc4OQACKlsz",
  },
  {
    kind: "huggingface-token",
    text: "HF token hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    needle: "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
  },
  {
    kind: "sendgrid-key",
    text: "mail via SG.aBcDeFgHiJkLmNoPqRsTuV.wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012",
    needle: "wXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVwXyZ012",
  },
  {
    kind: "digitalocean-token",
    text: "doctl auth dop_v1_0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
    needle: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
  },
  {
    kind: "jwt",
    text: "session cookie eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI0MjQyIiwibmFtZSI6IkFkYSJ9.7Pq3rTz9Wm2Kx8Vn4Jb6Hc1Ld5Sf0Ga",
    needle: "eyJzdWIiOiI0MjQyIiwibmFtZSI6IkFkYSJ9",
  },
  {
    kind: "private-key",
    text: `here is the deploy key:\n-----BEGIN RSA PRIVATE KEY-----\n${privateKeyBody.join("\n")}\n-----END RSA PRIVATE KEY-----\nkeep it safe`,
    needle: privateKeyBody[1]!,
  },
  {
    kind: "private-key",
    text: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----",
    needle: "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
  },
  {
    kind: "connection-string",
    text: "DATABASE_URL=postgres://app:Sup3rS3cretPassw0rd@db.internal:5432/app?sslmode=require",
    needle: "Sup3rS3cretPassw0rd",
  },
  {
    kind: "connection-string",
    text: "mongo at mongodb+srv://admin:M0ng0Pa55w0rdXYZ@cluster0.abcde.mongodb.net/test",
    needle: "M0ng0Pa55w0rdXYZ",
  },
  { kind: "password", text: "login with password=CorrectHorseBattery9 then sudo", needle: "CorrectHorseBattery9" },
  {
    kind: "password",
    text: '{"user":"ada","api_key":"k3y-Valu3-With-Digits-123"}',
    needle: "k3y-Valu3-With-Digits-123",
  },
  { kind: "password", text: "DB_PASSWORD='p@ss w0rd with spaces!'", needle: "p@ss w0rd with spaces!" },
  {
    kind: "bearer-token",
    text: "curl -H 'Authorization: Bearer 9f8e7d6c5b4a3210fedcba9876543210abcd' https://api",
    needle: "9f8e7d6c5b4a3210fedcba9876543210abcd",
  },
  {
    kind: "private-span",
    text: "plan: <private>TOP-SECRET-PLAN-ZEBRA</private> ship friday",
    needle: "TOP-SECRET-PLAN-ZEBRA",
  },
  {
    kind: "private-span",
    text: "<PRIVATE>nested <private>INNER-SECRET-OKAPI</private> still private</Private> public",
    needle: "still private",
  },
]

/** Every secret of the corpus in one text. */
export const corpusText = (): string => secretCorpus.map((secret) => secret.text).join("\n")

/** Strings that look random or technical but are not secrets: they must come through unchanged. */
export const innocentTexts: ReadonlyArray<string> = [
  "01ARZ3NDEKTSV4RRFFQ69G5FAV",
  "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
  "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  "cursor eyJwYWdlIjoyLCJhZnRlciI6IjAxQVJaM05ERUtUU1Y0UlJGRlE2OUc1RkFWIn0",
  "the password field is a string; set token: 500 and max_tokens=1000",
  "password: string",
  "see https://example.com:8080/path?q=1 and ssh://git@github.com/acme/app.git",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell variable reference, not a template
  "use process.env.API_KEY, not a literal; API_KEY=${API_KEY}",
  "the author: Ada Lovelace, the secretary: Bob",
  "base64 of hello is aGVsbG8=, uuid 123e4567-e89b-12d3-a456-426614174000",
  "sk-learn is not a key; task-123 neither",
  "Bearer tokens are sent in the Authorization header",
]
