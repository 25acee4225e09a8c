//! fsgate's built-in content rules: secrets with an unmistakable shape, plus one generic
//! high-entropy assignment rule that policies may switch off.
//!
//! The true-positive examples are random strings of the right shape, split with
//! `concat!` so that this source file itself holds no complete token: an agent reading
//! fsgate's own source under the default policy is not refused.

/// One built-in content rule (the same fields as a gitleaks `[[rules]]` entry).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BuiltinRule {
    /// Rule id; refusals name it `content:<id>`.
    pub id: &'static str,
    /// What it finds.
    #[expect(
        dead_code,
        reason = "read by people: the table is the rules' documentation"
    )]
    pub description: &'static str,
    /// Content regex.
    pub regex: &'static str,
    /// Capture group holding the secret.
    pub secret_group: Option<usize>,
    /// Minimum entropy of the secret.
    pub entropy: Option<f64>,
    /// Prefilter keywords.
    pub keywords: &'static [&'static str],
    /// Allowlist regexes (OR) matched against the secret.
    pub allow_regexes: &'static [&'static str],
    /// Allowlist stopwords (OR) looked for in the secret.
    pub allow_stopwords: &'static [&'static str],
    /// Must be detected (checked at every load).
    pub tps: &'static [&'static str],
    /// Must not be detected.
    pub fps: &'static [&'static str],
}

/// Stopwords of documentation placeholders.
const PLACEHOLDERS: &[&str] = &[
    "example",
    "placeholder",
    "changeme",
    "dummy",
    "sample",
    "xxxxxxxx",
    "redacted",
    "your_",
    "your-",
];

/// The built-in rules, in scan order.
pub(crate) const BUILTIN_CONTENT_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        id: "private-key",
        description: "PEM private key block (RSA, EC, DSA, OpenSSH, PKCS#8, PGP), with its body",
        // A body of at least 64 base64/header characters is required, so code that only
        // names the BEGIN/END markers (a PEM parser) is not a finding. A backslash is
        // body too: a key kept in a JSON string has its line breaks written `\n`; so are
        // quotes, `+`, `#`, `*` and `;`: a key kept as a program's string literals, one
        // per line, or in a comment block. Markers in any case. Without its END line, a
        // key is still one when 64 base64 characters follow its BEGIN line at once.
        regex: r#"(?i:-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)(?:[A-Za-z0-9+/=\s:,.\\"'#*;`-]{64,}?(?i:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)|(?:\s|\\[rn]|["'])*[A-Za-z0-9+/]{64})"#,
        secret_group: None,
        entropy: None,
        keywords: &["-----begin"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[
            concat!(
                "-----BEGIN OPENSSH PRIVATE",
                " KEY-----\n",
                "g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD\n",
                "z/TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1\n",
                "-----END OPENSSH PRIVATE KEY-----\n"
            ),
            concat!(
                "key = (\"-----BEGIN RSA PRIVATE",
                " KEY-----\\n\"\n",
                "  \"g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD\\n\"\n",
                "  \"z/TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1\\n\"\n",
                "  \"-----END RSA PRIVATE KEY-----\\n\")\n"
            ),
            concat!(
                "# -----begin rsa private",
                " key-----\n",
                "# g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD\n",
                "# z/TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBLEPH1\n",
                "# -----end rsa private key-----\n"
            ),
            concat!(
                "-----BEGIN EC PRIVATE",
                " KEY-----\n",
                "g6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po+799NksnRH9ucAUsdMlHUvTCQCyEZD\n",
                "z/TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3Ql\n"
            ),
        ],
        fps: &[
            "const BEGIN: &str = \"-----BEGIN RSA PRIVATE KEY-----\";\nconst END: &str = \"-----END RSA PRIVATE KEY-----\";",
            "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
            "if line == \"-----BEGIN RSA PRIVATE KEY-----\" {\n    return parse_private_key_body(lines, \"-----END RSA PRIVATE KEY-----\");\n}",
            "pem = \"-----BEGIN PRIVATE KEY-----\\n\" + base64_encode(key_der_bytes_of_the_private_key) + \"\\n-----END PRIVATE KEY-----\"",
        ],
    },
    BuiltinRule {
        id: "aws-access-key-id",
        description: "AWS access key id",
        regex: r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["akia", "asia", "abia", "acca", "a3t"],
        allow_regexes: &[r"EXAMPLE$"],
        allow_stopwords: &[],
        tps: &[concat!("aws_access_key_id = ", "AKIA", "UJZDEGXDNCF32EPF")],
        fps: &["AKIAIOSFODNN7EXAMPLE", "AKIAAAAAAAAAAAAAAAAA"],
    },
    BuiltinRule {
        id: "github-token",
        description: "GitHub personal access, OAuth, app or refresh token",
        regex: r"\b((?:ghp|gho|ghu|ghs|ghr)_[0-9A-Za-z]{36})\b",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[concat!(
            "token: ",
            "ghp_",
            "JBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLK"
        )],
        fps: &[
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "ghp_ is the prefix",
        ],
    },
    BuiltinRule {
        id: "github-fine-grained-pat",
        description: "GitHub fine-grained personal access token",
        regex: r"\b(github_pat_[0-9A-Za-z_]{82})\b",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["github_pat_"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[concat!(
            "github_pat_",
            "OmxgJTeKdNnFRIBXuDL7Dx_tpYlSXpfKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFLZDe1f8rESQedU"
        )],
        fps: &["see github_pat_ tokens in the docs"],
    },
    BuiltinRule {
        id: "gitlab-pat",
        description: "GitLab personal access token",
        regex: r"\b(glpat-[0-9A-Za-z_-]{20,64})\b",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["glpat-"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[concat!("GITLAB_TOKEN=", "glpat-", "N5KXSc7Tvo-hBKqFYY-k")],
        fps: &["glpat-xxxxxxxxxxxxxxxxxxxx"],
    },
    BuiltinRule {
        id: "slack-token",
        description: "Slack bot, user, app or legacy token",
        regex: r"\b(xox[abposr]-[0-9]{8,}-[0-9A-Za-z-]{8,})",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[concat!(
            "xoxb-",
            "1234567890123-",
            "kCzJr4i0B3JrTAwR4y9ojflj"
        )],
        fps: &["xoxb-not-a-token"],
    },
    BuiltinRule {
        id: "stripe-live-key",
        description: "Stripe live secret or restricted key",
        regex: r"\b((?:sk|rk)_live_[0-9A-Za-z]{24,99})\b",
        secret_group: Some(1),
        entropy: Some(3.0),
        keywords: &["sk_live_", "rk_live_"],
        allow_regexes: &[],
        allow_stopwords: &[],
        tps: &[concat!(
            "STRIPE_KEY=",
            "sk_live_",
            "oQoaF1LlqsajAIxNKu8iS2G8"
        )],
        fps: &["sk_test_oQoaF1LlqsajAIxNKu8iS2G8"],
    },
    BuiltinRule {
        id: "generic-api-key",
        description: "high-entropy value assigned to a key, secret, token or password name",
        // The name must end the identifier (`db_password`, `AWS_SECRET_ACCESS_KEY`), the
        // value must be one run of token characters ended by a quote, space, `;`, `,` or
        // the line end, so code (`token = next_token()`) does not match.
        regex: r#"(?im)(?:^|[^0-9a-z_.-])[0-9a-z_.-]{0,40}?(?:secret|token|passw(?:or)?d|pwd|api[_.-]?key|access[_.-]?key|private[_.-]?key|credentials?)(?:[_.-]?(?:access[_.-]?)?(?:key|id|value|base))?["']?[ \t]*(?::=|=>|=|:)[ \t]*["']?([0-9a-z+/=~_.-]{16,128})(?:["'\s;,]|$)"#,
        secret_group: Some(1),
        entropy: Some(3.5),
        keywords: &[
            "secret",
            "token",
            "passwd",
            "password",
            "pwd",
            "api_key",
            "apikey",
            "api-key",
            "access_key",
            "accesskey",
            "private_key",
            "credential",
        ],
        // Values without a digit, or without a letter, are names and numbers, not secrets.
        allow_regexes: &[r"^[^0-9]+$", r"(?i)^[^a-z]+$"],
        allow_stopwords: PLACEHOLDERS,
        tps: &[concat!("api_key = \"", "kTBGzvAmwufUxbvJDCTbyvHN", "7\"")],
        fps: &[
            "password = \"get_password_from_env\"",
            "let token = tokens.next_token_value();",
            "secret_key = os.environ[\"SECRET_KEY\"]",
            "tokenizer_name = \"bert-base-uncased-v2\"",
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "password: hunter2hunter2hunter2",
        ],
    },
];
