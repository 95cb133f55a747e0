//! State files (DESIGN.md "Beyond the spec": checkpoints, saved inputs and
//! status files are read only when they are regular files owned by the
//! user in the user's own directories, without following links, with a
//! size bound). Each test plants what an attacker or an accident could
//! leave there, and checks that `loopx resume`, `loopx run --resume` and
//! `loopx status` neither trust it, nor hang, nor fill memory.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// Where the project's runs keep their checkpoints (Project gives each
/// test its own HOME, so `~/.local/state`).
fn runs_dir(p: &Project) -> PathBuf {
    p.home().join(".local/state/loopx/runs")
}

/// A private state directory for `loopx status` (XDG_RUNTIME_DIR), so
/// other tests' runs are not listed.
fn runtime_dir(p: &Project) -> PathBuf {
    let d = p.home().join("run");
    fs::create_dir_all(&d).expect("runtime dir");
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

/// `loopx <args>`, with a private XDG_RUNTIME_DIR and a deadline well
/// short of the default: a hang is the failure these tests look for.
fn loopx(p: &Project, args: &[&str]) -> Run {
    p.loopx(args)
        .env("XDG_RUNTIME_DIR", runtime_dir(p))
        .timeout(Duration::from_secs(20))
}

/// `loopx <args>` with at most 1 GiB of address space: reading a 3 GB
/// file, or /dev/zero, to its end fails instead of taking the machine's
/// memory.
fn loopx_capped(p: &Project, args: &[&str]) -> Run {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(loopx_bin())
        .args(args)
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    Run::command(cmd)
        .env("XDG_RUNTIME_DIR", runtime_dir(p))
        .timeout(Duration::from_secs(20))
}

/// A workflow `w` whose `index` hands "the input" to `b`, which fails
/// while the file `broken` exists, else stops.
fn handoff() -> Project {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf '{\"result\":\"the input\",\"goto\":\"b\"}'\n",
    )
    .script(
        "w",
        "b.sh",
        "[ -e \"$LOOPX_PROJECT_ROOT/broken\" ] && exit 3\nprintf '{\"stop\":true}'\n",
    )
    .file("broken", "");
    p
}

const B_FAILED: &str = "loopx: error: script w:b exited with code 3; stopping the loop\n";

/// Runs `handoff`'s workflow to its failure; the run id it left.
fn failed_run(p: &Project) -> String {
    loopx(p, &["run", "w"])
        .status(1)
        .stderr_contains(B_FAILED)
        .stderr_contains("loopx: the run can be resumed: loopx resume ")
        .run();
    let ids: Vec<String> = names(&runs_dir(p))
        .into_iter()
        .filter_map(|n| n.strip_suffix(".ckpt").map(str::to_string))
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// FNV-1a, 64 bits, as checkpoint.rs checks a record with.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The record in a checkpoint file.
fn record(path: &Path) -> Value {
    let bytes = fs::read(path).expect("read the checkpoint");
    let nl = bytes.iter().position(|&b| b == b'\n').expect("a header");
    let header = String::from_utf8_lossy(&bytes[..nl]).into_owned();
    let len: usize = header
        .split(' ')
        .nth(2)
        .expect("length")
        .parse()
        .expect("a number");
    serde_json::from_slice(&bytes[nl + 1..nl + 1 + len]).expect("the record")
}

/// Writes `record` as a whole checkpoint file (header, length, checksum).
fn write_record(path: &Path, record: &Value) {
    let body = record.to_string();
    let mut bytes = format!(
        "loopx-checkpoint 1 {} {:016x}\n",
        body.len(),
        fnv(body.as_bytes())
    )
    .into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    fs::write(path, bytes).expect("write the checkpoint");
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

#[test]
fn another_users_checkpoint_is_neither_resumed_nor_listed() {
    if !is_root() {
        return skip(
            "another_users_checkpoint_is_neither_resumed_nor_listed",
            "needs root to give a file to another user",
        );
    }
    let p = handoff();
    let id = failed_run(&p);
    // Planted: the same run, now with an env file whose BASH_ENV runs code
    // in every script, owned by another user (nobody).
    p.file(
        "evil.env",
        &format!("BASH_ENV={}\n", p.path("evil.sh").display()),
    )
    .file("evil.sh", &format!("touch {}\n", p.path("pwned").display()));
    let ckpt = runs_dir(&p).join(format!("{id}.ckpt"));
    let mut r = record(&ckpt);
    r["options"]["env_file"] = p.path("evil.env").to_string_lossy().into_owned().into();
    write_record(&ckpt, &r);
    std::os::unix::fs::chown(&ckpt, Some(65534), Some(65534)).expect("chown");
    fs::remove_file(p.path("broken")).expect("fix b");
    loopx(&p, &["resume"])
        .status(1)
        .stdout("")
        .stderr_contains("no resumable run in ")
        .run();
    loopx(&p, &["resume", &id])
        .status(1)
        .stdout("")
        .stderr_contains(&format!("no resumable run '{id}'"))
        .run();
    loopx(&p, &["run", "--resume", "w"]).stdout("").run();
    assert!(!p.exists("pwned"), "the planted env file ran");
    loopx(&p, &["status"]).stdout("no loopx runs\n").run();
}

#[test]
fn a_checkpoint_directory_of_another_user_is_refused_by_name() {
    if !is_root() {
        return skip(
            "a_checkpoint_directory_of_another_user_is_refused_by_name",
            "needs root to give a directory to another user",
        );
    }
    let p = handoff();
    failed_run(&p);
    let runs = runs_dir(&p);
    std::os::unix::fs::chown(&runs, Some(65534), Some(65534)).expect("chown");
    let why = format!(
        "{} for resume checkpoints, as it belongs to uid 65534, not to you (uid 0)",
        runs.display()
    );
    loopx(&p, &["resume"])
        .status(1)
        .stdout("")
        .stderr_contains(&format!("loopx: error: cannot use {why}"))
        .run();
    loopx(&p, &["status"])
        .stdout("no loopx runs\n")
        .stderr_contains("loopx: warning: resumable runs are not listed: ")
        .run();
    // A new run goes on, and says it cannot be resumed.
    fs::remove_file(p.path("broken")).expect("fix b");
    loopx(&p, &["run", "w"])
        .stdout("")
        .stderr_contains("loopx: warning: this run cannot be resumed: ")
        .run();
}

#[test]
fn a_checkpoint_directory_opened_to_a_group_is_made_private_again() {
    // Kubernetes' fsGroup makes a volume's tree group-writable and setgid
    // on every pod start: checkpoints must go on, not silently stop.
    let p = handoff();
    let runs = runs_dir(&p);
    fs::create_dir_all(&runs).expect("runs dir");
    for d in [runs.parent().expect("loopx dir"), &runs] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o2770)).expect("chmod");
    }
    let id = failed_run(&p);
    fs::set_permissions(&runs, fs::Permissions::from_mode(0o2770)).expect("chmod");
    let ckpt = runs.join(format!("{id}.ckpt"));
    fs::set_permissions(&ckpt, fs::Permissions::from_mode(0o660)).expect("chmod");
    fs::remove_file(p.path("broken")).expect("fix b");
    loopx(&p, &["resume"]).stdout("").run();
    let mode = fs::metadata(&runs).expect("stat").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700);
}

#[test]
fn fifos_named_like_state_files_hang_nothing() {
    let p = handoff();
    let runs = runs_dir(&p);
    fs::create_dir_all(&runs).expect("runs dir");
    for d in [runs.parent().expect("loopx dir"), &runs] {
        fs::set_permissions(d, fs::Permissions::from_mode(0o700)).expect("chmod");
    }
    mkfifo(&runs.join("0123456789abcdef.ckpt"));
    let live = runtime_dir(&p).join("loopx");
    fs::create_dir_all(&live).expect("status dir");
    fs::set_permissions(&live, fs::Permissions::from_mode(0o700)).expect("chmod");
    mkfifo(&live.join("1.json"));
    loopx(&p, &["status"]).stdout("no loopx runs\n").run();
    loopx(&p, &["resume"])
        .status(1)
        .stdout("")
        .stderr_contains("no resumable run in ")
        .run();
    fs::remove_file(p.path("broken")).expect("fix b");
    loopx(&p, &["run", "--resume", "w"]).stdout("").run();
}

#[test]
fn a_saved_input_that_is_a_fifo_or_a_link_is_refused_unread() {
    let p = handoff();
    let id = failed_run(&p);
    let runs = runs_dir(&p);
    let input = names(&runs)
        .into_iter()
        .find(|n| n.starts_with(&format!("{id}.input.")))
        .map(|n| runs.join(n))
        .expect("a saved input");
    fs::remove_file(&input).expect("rm input");
    mkfifo(&input);
    let cannot = format!("loopx: error: cannot read the saved input of run {id}: ");
    loopx(&p, &["resume"])
        .status(1)
        .stdout("")
        .stderr(&format!("{cannot}it is not a regular file but a fifo\n"))
        .run();
    fs::remove_file(&input).expect("rm fifo");
    std::os::unix::fs::symlink("/dev/zero", &input).expect("symlink");
    loopx_capped(&p, &["resume"])
        .status(1)
        .stdout("")
        .stderr(&format!("{cannot}it is a symbolic link\n"))
        .run();
}

#[test]
fn a_huge_sparse_checkpoint_costs_status_no_memory() {
    // Measured with GNU time's peak resident size: a cap on the address
    // space would hide the cost (std's read_to_end fails its reservation
    // gracefully), not show it.
    let Some(time) = Some(PathBuf::from("/usr/bin/time")).filter(|t| t.is_file()) else {
        return skip(
            "a_huge_sparse_checkpoint_costs_status_no_memory",
            "needs GNU time at /usr/bin/time",
        );
    };
    let p = Project::new();
    let runs = runs_dir(&p);
    fs::create_dir_all(&runs).expect("runs dir");
    let big = fs::File::create(runs.join("0123456789abcdef.ckpt")).expect("create");
    big.set_len(1 << 30).expect("a 1 GiB hole");
    let peak = p.path("peak");
    let mut cmd = Command::new(time);
    cmd.arg("-o")
        .arg(&peak)
        .args(["-f", "%M"])
        .arg(loopx_bin())
        .arg("status")
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    Run::command(cmd)
        .env("XDG_RUNTIME_DIR", runtime_dir(&p))
        .timeout(Duration::from_secs(20))
        .stdout("no loopx runs\n")
        .run();
    let kib: u64 = p.read("peak").trim().parse().expect("a size in KiB");
    assert!(kib < 100 * 1024, "status took {kib} KiB");
}

#[test]
fn status_lists_only_valid_run_ids_and_long_paths_without_a_panic() {
    let p = handoff();
    let id = failed_run(&p);
    let runs = runs_dir(&p);
    let mut r = record(&runs.join(format!("{id}.ckpt")));
    // A tampered run id, under its own name and under a valid one.
    let evil = "x; touch pwned";
    r["run_id"] = evil.into();
    write_record(&runs.join(format!("{evil}.ckpt")), &r);
    write_record(&runs.join("0000000000000001.ckpt"), &r);
    // A project path of 70,000 characters.
    let long = format!("/{}", "p".repeat(70_000));
    r["run_id"] = "0000000000000002".into();
    r["root"] = long.clone().into();
    write_record(&runs.join("0000000000000002.ckpt"), &r);
    let out = loopx(&p, &["status"])
        .stdout_contains(&format!("loopx resume {id}"))
        .run();
    assert!(!out.stdout.contains("touch"), "{out}");
    assert!(out.stdout.contains(&long), "{out}");
    assert!(
        out.stdout.contains("loopx resume 0000000000000002"),
        "{out}"
    );
    assert!(!out.stdout.contains("0000000000000001"), "{out}");
}
