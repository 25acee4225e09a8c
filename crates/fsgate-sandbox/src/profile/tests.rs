use std::path::Path;

use serde_json::json;

use super::*;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn agents_are_detected_from_how_people_start_them() {
    let cases: &[(&str, &[&str], Option<AgentKind>)] = &[
        ("claude-agent-acp", &[], Some(AgentKind::ClaudeAgentAcp)),
        (
            "/w/.peers/claude-agent-acp/node_modules/.bin/claude-agent-acp",
            &[],
            Some(AgentKind::ClaudeAgentAcp),
        ),
        (
            "npx",
            &["-y", "@agentclientprotocol/claude-agent-acp@0.101.0"],
            Some(AgentKind::ClaudeAgentAcp),
        ),
        (
            "node",
            &["/opt/node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js"],
            Some(AgentKind::ClaudeAgentAcp),
        ),
        ("gemini", &["--acp"], Some(AgentKind::GeminiCli)),
        (
            "/usr/local/bin/gemini",
            &["--experimental-acp"],
            Some(AgentKind::GeminiCli),
        ),
        (
            "node",
            &[
                "/x/node_modules/@google/gemini-cli/bundle/gemini.js",
                "--acp",
            ],
            Some(AgentKind::GeminiCli),
        ),
        (
            "npx",
            &["@google/gemini-cli", "--acp"],
            Some(AgentKind::GeminiCli),
        ),
        (
            "fast-agent-acp",
            &["--model", "passthrough"],
            Some(AgentKind::FastAgent),
        ),
        (
            "uvx",
            &["--from", "fast-agent-mcp", "fast-agent-acp"],
            Some(AgentKind::FastAgent),
        ),
        ("opencode", &["acp"], Some(AgentKind::Opencode)),
        (
            "npx",
            &["opencode-ai@1.18.33", "acp"],
            Some(AgentKind::Opencode),
        ),
        ("codex-acp", &[], Some(AgentKind::CodexAcp)),
        (
            "npx",
            &["@zed-industries/codex-acp"],
            Some(AgentKind::CodexAcp),
        ),
        // Not an agent fsgate has a profile for, and names that only look alike.
        ("python3", &["agent.py"], None),
        ("node", &["agent.mjs"], None),
        ("claude-code-acp", &[], None),
        ("my-gemini-wrapper", &["--acp"], None),
        ("cat", &["/tmp/gemini-notes.txt"], None),
        ("python3", &["agent.py", "--root", "/home/me/gemini"], None),
    ];
    for (program, list, want) in cases {
        assert_eq!(detect(program, &args(list)), *want, "{program} {list:?}");
    }
}

#[test]
fn the_setting_names_a_profile_or_detects_one() {
    let a = args(&["--acp"]);
    assert_eq!(
        ProfileSetting::Auto.resolve("gemini", &a),
        Some(AgentKind::GeminiCli)
    );
    assert_eq!(ProfileSetting::None.resolve("gemini", &a), None);
    assert_eq!(
        ProfileSetting::Opencode.resolve("./wrapper.sh", &a),
        Some(AgentKind::Opencode)
    );
    let parsed: ProfileSetting = serde_json::from_value(json!("claude-agent-acp")).unwrap();
    assert_eq!(parsed, ProfileSetting::ClaudeAgentAcp);
    assert!(serde_json::from_value::<ProfileSetting>(json!("claude")).is_err());
    assert_eq!(ProfileSetting::default(), ProfileSetting::Auto);
}

#[test]
fn each_profile_names_what_it_turns_off_and_what_stays_on() {
    let dir = Path::new("/tmp/scratch/profile");
    let claude = ProfilePlan::new(AgentKind::ClaudeAgentAcp, true, dir, true);
    for tool in ["Read", "Write", "Edit", "Glob", "Grep"] {
        assert!(claude.off.iter().any(|t| t == tool), "{claude:?}");
    }
    let meta = claude.session_meta.clone().unwrap();
    assert_eq!(meta["claudeCode"]["options"]["disallowedTools"][0], "Read");
    assert_eq!(
        meta["claudeCode"]["options"]["settings"]["permissions"]["allow"][0],
        "mcp__fsgate"
    );
    assert!(claude.env.contains(&("IS_SANDBOX".into(), "1".into())));
    let loose = ProfilePlan::new(AgentKind::ClaudeAgentAcp, true, dir, false);
    assert!(loose.env.is_empty(), "IS_SANDBOX only when confined");
    assert!(loose.left_on.iter().any(|n| n.contains("--confine-agent")));

    let gemini = ProfilePlan::new(AgentKind::GeminiCli, false, dir, true);
    assert_eq!(
        gemini.args,
        ["--policy", "/tmp/scratch/profile/gemini-policy.toml"]
    );
    let (name, text) = &gemini.files[0];
    assert_eq!(name, "gemini-policy.toml");
    let parsed: toml::Value = toml::from_str(text).unwrap();
    assert_eq!(parsed["rule"][0]["decision"].as_str(), Some("deny"));
    // Gemini CLI prefixes a toolName given with mcpName itself: `mcp_fsgate_*` there
    // would become `mcp_fsgate_mcp_fsgate_*` and match nothing.
    assert_eq!(parsed["rule"][1]["mcpName"].as_str(), Some("fsgate"));
    assert_eq!(parsed["rule"][1]["toolName"].as_str(), Some("*"));
    assert_eq!(parsed["rule"][1]["decision"].as_str(), Some("allow"));
    assert!(
        gemini
            .env
            .contains(&("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()))
    );
    let loose = ProfilePlan::new(AgentKind::GeminiCli, true, dir, false);
    assert!(
        loose.env.is_empty(),
        "the folder is trusted only when the agent is confined"
    );
    assert_eq!(
        parsed["rule"][0]["toolName"].as_array().map(Vec::len),
        Some(GEMINI_FILE_TOOLS.len())
    );
    assert!(
        gemini.summary().contains("from the policy"),
        "{}",
        gemini.summary()
    );

    let opencode = ProfilePlan::new(AgentKind::Opencode, true, dir, true);
    let (k, v) = &opencode.env[0];
    assert_eq!(k, "OPENCODE_PERMISSION");
    let perm: serde_json::Value = serde_json::from_str(v).unwrap();
    assert_eq!(perm["read"], "deny");
    assert_eq!(perm["edit"], "deny");

    let codex = ProfilePlan::new(AgentKind::CodexAcp, true, dir, true);
    assert!(codex.off.is_empty());
    assert!(
        codex.summary().contains("apply_patch"),
        "{}",
        codex.summary()
    );
    let fast = ProfilePlan::new(AgentKind::FastAgent, true, dir, true);
    assert!(fast.off.is_empty() && fast.session_meta.is_none() && fast.args.is_empty());
}

#[test]
fn session_meta_merges_with_the_editors_own() {
    let mut params = json!({"cwd": "/w", "mcpServers": [], "_meta": {
        "claudeCode": {"options": {"disallowedTools": ["WebFetch"], "model": "x",
                                   "settings": {"permissions": {"allow": ["Bash(ls)"]}}}},
        "other": 1,
    }});
    let add = json!({"claudeCode": {"options": {
        "disallowedTools": ["Read", "WebFetch"],
        "settings": {"permissions": {"allow": ["mcp__fsgate"]}},
        "model": "ignored",
    }}});
    assert!(merge_session_meta(&mut params, &add));
    let opts = &params["_meta"]["claudeCode"]["options"];
    assert_eq!(opts["disallowedTools"], json!(["WebFetch", "Read"]));
    assert_eq!(
        opts["settings"]["permissions"]["allow"],
        json!(["Bash(ls)", "mcp__fsgate"])
    );
    assert_eq!(opts["model"], "x", "the editor's scalar stands");
    assert_eq!(params["_meta"]["other"], 1);

    let mut bare = json!({"cwd": "/w"});
    assert!(merge_session_meta(&mut bare, &add));
    assert_eq!(bare["_meta"], add);
    let mut odd = json!({"cwd": "/w", "_meta": "text"});
    assert!(!merge_session_meta(&mut odd, &add));
    assert!(!merge_session_meta(&mut json!([1]), &add));
}

#[test]
fn the_permission_follows_the_hosted_servers_name() {
    let plan = ProfilePlan::new(AgentKind::ClaudeAgentAcp, true, Path::new("/d"), false);
    let meta = plan.session_meta.unwrap();
    let renamed = meta_for_server(&meta, "fsgate-2");
    let opts = &renamed["claudeCode"]["options"];
    assert_eq!(
        opts["settings"]["permissions"]["allow"],
        json!(["mcp__fsgate-2"])
    );
    assert_eq!(
        opts["disallowedTools"],
        meta["claudeCode"]["options"]["disallowedTools"]
    );
    assert_eq!(meta_for_server(&meta, HOSTED_SERVER), meta);
}
