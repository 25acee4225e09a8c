//! The JSON Schema of policy files (`policies/schema.json`), generated from the same
//! serde types the loader uses ([`RawPolicy`]), so it cannot drift from them.
//!
//! Draft-07, which taplo / Even Better TOML understand: a policy that starts with
//! `#:schema ./schema.json` gets completion, validation and hover docs (the doc comments).
//! Regenerate with `fsgate policy schema > policies/schema.json`, or
//! `FSGATE_WRITE_SCHEMA=1 cargo test --lib policy::schema`.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::raw::RawPolicy;

/// Where the committed schema lives, relative to the repository root.
#[cfg(test)]
pub(crate) const SCHEMA_PATH: &str = "policies/schema.json";

/// The schema as a JSON value.
pub(crate) fn schema() -> Value {
    let mut schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<RawPolicy>();
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("title".into(), "fsgate policy".into());
        obj.insert(
            "description".into(),
            "An fsgate policy file (TOML): which operations an untrusted agent may perform on which workspace paths. Every key is documented in policies/README.md."
                .into(),
        );
    }
    schema.to_value()
}

/// The schema as committed: pretty JSON with a final newline.
pub(crate) fn schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn repo() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    /// The committed schema must be what the types generate today.
    #[test]
    fn committed_schema_is_current() {
        let path = repo().join(SCHEMA_PATH);
        let fresh = schema_text();
        if std::env::var_os("FSGATE_WRITE_SCHEMA").is_some() {
            std::fs::write(&path, &fresh).expect("write policies/schema.json");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "{SCHEMA_PATH} is out of date with the policy types; regenerate it with\n  \
             cargo run -- policy schema > {SCHEMA_PATH}\nor\n  \
             FSGATE_WRITE_SCHEMA=1 cargo test --lib policy::schema"
        );
    }

    fn validator() -> jsonschema::Validator {
        jsonschema::validator_for(&schema())
            .expect("the generated schema is a valid draft-07 schema")
    }

    fn errors(v: &jsonschema::Validator, toml_text: &str) -> Vec<String> {
        let value: Value = toml::from_str(toml_text).expect("TOML");
        v.iter_errors(&value)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    }

    /// Every shipped policy validates against the schema.
    #[test]
    fn shipped_policies_validate() {
        let v = validator();
        let mut n = 0;
        let dirs = [repo().join("policies"), repo().join("policies/examples")];
        for e in dirs
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
        {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                let errs = errors(&v, &text);
                assert!(errs.is_empty(), "{}: {errs:?}", path.display());
                n += 1;
            }
        }
        assert!(n >= 1);
    }

    /// The schema is as strict as the loader: unknown keys, wrong types and unknown ops fail.
    #[test]
    fn schema_rejects_what_the_loader_rejects() {
        let v = validator();
        for bad in [
            "version = 1\nbogus = 1\n",
            "version = 2\n",
            "version = 1\n[limits]\nbinary = \"maybe\"\n",
            "version = 1\n[[rule]]\nid = \"x\"\neffect = \"allow\"\nops = [\"reed\"]\npaths = [\"**\"]\n",
            "version = 1\n[[rule]]\nid = \"x\"\neffect = \"permit\"\nops = [\"read\"]\n",
            "version = 1\n[content]\n[[content.rules]]\nid = \"x\"\nregex = \"a\"\nsecret_group = 1\n",
            "version = 1\n[[test]]\nop = \"read\"\npath = \"a\"\n",
            "version = 1\n[agent]\nreed = [\"/x\"]\n",
            "version = 1\n[agent]\nnetwork = \"some\"\n",
            "version = 1\n[agent]\nnetwork = [0]\n",
            "version = 1\n[agent]\nnetwork = []\n",
            "version = 1\n[agent]\nnetwork = [70000]\n",
            "version = 1\n[agent]\nprofile = \"claude\"\n",
        ] {
            assert!(!errors(&v, bad).is_empty(), "schema accepted:\n{bad}");
            assert!(
                crate::Policy::from_toml(bad, "t").is_err(),
                "loader accepted:\n{bad}"
            );
        }
        assert!(errors(&v, "version = 1\n[content]\nops = [\"read\"]\n").is_empty());
        for good in ["\"none\"", "\"all\"", "[443, 11434]"] {
            let text = format!("version = 1\n[agent]\nnetwork = {good}\n");
            assert!(errors(&v, &text).is_empty(), "{text}");
            assert!(crate::Policy::from_toml(&text, "t").is_ok(), "{text}");
        }
    }

    fn property_names(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    out.extend(props.keys().cloned());
                }
                map.values().for_each(|x| property_names(x, out));
            }
            Value::Array(items) => items.iter().for_each(|x| property_names(x, out)),
            _ => {}
        }
    }

    /// policies/README.md documents every key the loader accepts.
    #[test]
    fn readme_documents_every_key() {
        let readme = std::fs::read_to_string(repo().join("policies/README.md")).unwrap();
        let mut keys = std::collections::BTreeSet::new();
        property_names(&schema(), &mut keys);
        let missing: Vec<&String> = keys
            .iter()
            .filter(|k| {
                ![
                    format!("`{k}`"),
                    format!("[{k}]"),
                    format!("[[{k}]]"),
                    format!("{k} = "),
                ]
                .iter()
                .any(|form| readme.contains(form.as_str()))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "policies/README.md does not document {missing:?}"
        );
        assert!(keys.len() > 40, "{keys:?}");
    }

    /// Hover docs come from the doc comments.
    #[test]
    fn descriptions_come_from_doc_comments() {
        let text = schema_text();
        assert!(
            text.contains(
                "Workspace-relative globs; a directory glob covers everything beneath it."
            )
        );
        assert!(text.contains("\"$schema\": \"http://json-schema.org/draft-07/schema#\""));
    }
}
