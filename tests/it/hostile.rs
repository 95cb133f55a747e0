//! What scripts say, taken at its worst (DESIGN.md "Beyond the spec"): a
//! `cost_usd` that would overflow a sum, times past year 9999, control
//! characters meant for the terminal. loopx's own output stays valid (JSON
//! that parses, RFC 3339 times) and its messages stay text.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::util::*;

fn events(p: &Project, rel: &str) -> Vec<Value> {
    p.read(rel)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A private state directory for `loopx status` (XDG_RUNTIME_DIR).
fn runtime_dir(p: &Project) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let d = p.home().join("run");
    fs::create_dir_all(&d).expect("runtime dir");
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

fn status_json(p: &Project) -> Vec<Value> {
    let out = p
        .loopx(&["status", "--json"])
        .env("XDG_RUNTIME_DIR", runtime_dir(p))
        .stdout_contains("[")
        .run();
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    v.as_array().expect("an array").clone()
}

#[test]
fn costs_past_the_bound_are_not_counted_and_every_json_written_stays_valid() {
    // Two costs of 1e308 summed to Infinity, written as `Infinity` into the
    // run log (not JSON) and the checkpoint (then unreadable).
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "n=$(cat \"$LOOPX_PROJECT_ROOT/n\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$LOOPX_PROJECT_ROOT/n\"\n\
         case $n in 0) printf '{\"cost_usd\":1e308}' ;; 1) printf '{\"cost_usd\":1e999}' ;;\n\
         2) printf '{\"cost_usd\":0.5}' ;; *) exit 4 ;; esac\n",
    );
    let warning = "loopx: warning: w:index reported a cost_usd that is not a number from 0 to 1000000000; it is not counted\n";
    let out = p
        .loopx(&["run", "--log", "run.jsonl", "w"])
        .status(1)
        .stdout("")
        // Past its first iteration: kept, so the resume line follows.
        .stderr_contains(&format!(
            "{warning}{warning}loopx: error: script w:index exited with code 4; stopping the loop\n\
             loopx: the run can be resumed: loopx resume "
        ))
        .run();
    assert!(
        !out.stderr.contains("1e308") && !out.stderr.contains("1e999"),
        "{out}"
    );
    let ev = events(&p, "run.jsonl");
    let end = ev.last().expect("run_end");
    assert_eq!(end["cost_usd"], 0.5, "{end}");
    let resumable: Vec<Value> = status_json(&p)
        .into_iter()
        .filter(|r| r["state"] == "resumable")
        .collect();
    assert_eq!(
        resumable.len(),
        1,
        "the checkpoint reads back: {resumable:?}"
    );
    assert_eq!(resumable[0]["cost_usd"], 0.5);
}

#[test]
fn max_cost_past_the_bound_is_a_usage_error() {
    let p = Project::new();
    p.script("w", "index.sh", "");
    let huge = format!("1{}", "0".repeat(300));
    p.loopx(&["run", "--max-cost", &huge, "w"])
        .usage_error(
            "for --max-cost: expected US dollars (a number from 0 to 1000000000",
            "loopx run --help",
        )
        .run();
    p.loopx(&["run", "-n", "1", "--max-cost", "1000000000", "w"])
        .stdout("")
        .run();
}

#[test]
fn a_wait_past_year_9999_is_shown_as_a_valid_time() {
    let p = Project::new();
    p.script("w", "index.sh", r#"printf '{"retry_after":1e300}'"#);
    let out = p
        .loopx(&["run", "--log", "run.jsonl", "w"])
        .status(75)
        .stdout("")
        .stderr_contains("9999-12-31T23:59:59Z")
        .run();
    assert!(!out.stderr.contains(":Z"), "{out}");
    for e in events(&p, "run.jsonl") {
        for key in ["time", "resume_at"] {
            if let Some(t) = e[key].as_str() {
                assert_eq!(t.len(), 24, "{key} in {e}");
            }
        }
    }
}

#[test]
fn a_run_waiting_more_than_30_days_out_is_kept_until_its_time() {
    let p = Project::new();
    // 60 days: past --max-wait's default of a day, so the run ends (75),
    // resumable at that time.
    p.script("w", "index.sh", r#"printf '{"retry_after":5184000}'"#);
    p.loopx(&["run", "w"])
        .status(75)
        .stdout("")
        .stderr_contains("longer than --max-wait")
        .run();
    let runs = p.home().join(".local/state/loopx/runs");
    for name in names(&runs) {
        let touched = Command::new("touch")
            .args(["-d", "31 days ago"])
            .arg(runs.join(name))
            .status();
        assert!(touched.is_ok_and(|s| s.success()), "touch");
    }
    let resumable = status_json(&p)
        .into_iter()
        .filter(|r| r["state"] == "resumable")
        .count();
    assert_eq!(resumable, 1, "pruned before its time came");
}

#[test]
fn control_characters_from_scripts_never_reach_the_terminal_raw() {
    let cases = [
        // -v's note quotes the value of stop.
        (
            r#"{"stop":"\u001b[2J"}"#,
            &["run", "-v", "-n", "1", "w"][..],
            0,
            "stop is \"\\u{1b}[2J\"",
        ),
        // An invalid retry_after's message quotes the value, escaped, once.
        (
            r#"{"retry_after":"\u001b[2J\r"}"#,
            &["run", "w"][..],
            1,
            "invalid retry_after \"\\u001b[2J\\r\" from w:index: not an RFC 3339 time",
        ),
    ];
    for (stdout, args, code, said) in cases {
        let p = Project::new();
        p.script(
            "w",
            "index.sh",
            &format!("printf '%s' {}", sh_quote(stdout)),
        );
        let out = p
            .loopx(args)
            .status(code)
            .stdout("")
            .stderr_contains(said)
            .run();
        assert!(
            !out.stderr.contains('\u{1b}') && !out.stderr.contains('\r'),
            "{stdout}: {out}"
        );
    }
}
