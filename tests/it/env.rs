//! Environment variables end to end (§8): the env file grammar as scripts see
//! it, where the global file lives, `-e`, injection precedence and loading
//! once per run; and the `loopx env set/remove/list` subcommands (§4.3).

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::*;
use proptest::prelude::*;

/// A script that records, for each name, `NAME=[value]` or `NAME unset` in
/// `$LOOPX_PROJECT_ROOT/vars`, then stops the loop.
fn dump_script(names: &[&str]) -> String {
    let mut s = String::new();
    for n in names {
        s.push_str(&format!(
            "if [ -n \"${{{n}+x}}\" ]; then printf '%s=[%s]\\n' {n} \"${n}\"; \
             else printf '%s unset\\n' {n}; fi >> \"$LOOPX_PROJECT_ROOT/vars\"\n"
        ));
    }
    s.push_str("printf '{\"stop\":true}'\n");
    s
}

/// A project whose `ralph:index` dumps `names`.
fn dump_project(names: &[&str]) -> Project {
    let p = Project::new();
    p.script("ralph", "index.sh", &dump_script(names));
    p
}

/// What the dump script recorded, one entry per line.
fn dumped(p: &Project) -> Vec<String> {
    p.read("vars").lines().map(str::to_string).collect()
}

/// Runs `loopx run [extra...] ralph` with `run` configured by `f`, expecting
/// success, and returns what the script saw.
fn run_dump(p: &Project, extra: &[&str], f: impl FnOnce(Run) -> Run) -> Vec<String> {
    let _ = fs::remove_file(p.path("vars"));
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    args.push("ralph");
    f(p.loopx(&args)).stdout("").run();
    dumped(p)
}

fn seen(p: &Project) -> Vec<String> {
    run_dump(p, &[], |r| r)
}

// --------------------------------------------------------- §8.1 grammar

#[test]
fn env_file_plain_assignments_are_injected() {
    let p = dump_project(&["A", "B_2", "_c", "EMPTY"]);
    p.global_env("A=1\nB_2=two words\n_c=x\nEMPTY=\n");
    assert_eq!(seen(&p), ["A=[1]", "B_2=[two words]", "_c=[x]", "EMPTY=[]"]);
}

#[test]
fn env_file_key_extends_to_the_first_equals() {
    let p = dump_project(&["EQ", "LEAD"]);
    // Only trailing whitespace is trimmed: a space after '=' is value.
    p.global_env("EQ=a=b==c\nLEAD= v\n");
    assert_eq!(seen(&p), ["EQ=[a=b==c]", "LEAD=[ v]"]);
}

#[test]
fn env_file_comment_lines_are_skipped_and_inline_hash_is_value() {
    let p = dump_project(&["COMMENTED", "HASH", "QHASH"]);
    p.global_env("# COMMENTED=1\n#COMMENTED=2\nHASH=x # not a comment\nQHASH=\"#x\"\n");
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(
        dumped(&p),
        ["COMMENTED unset", "HASH=[x # not a comment]", "QHASH=[#x]"]
    );
}

#[test]
fn env_file_blank_lines_are_ignored() {
    let p = dump_project(&["A", "B"]);
    p.global_env("\nA=1\n\n   \n\t\nB=2\n\n");
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(dumped(&p), ["A=[1]", "B=[2]"]);
}

#[test]
fn env_file_duplicate_keys_last_wins() {
    let p = dump_project(&["D", "L"]);
    p.global_env("D=first\nD=second\nD=third\n")
        .file("local.env", "L=one\nL=two\n");
    assert_eq!(
        run_dump(&p, &["-e", "local.env"], |r| r),
        ["D=[third]", "L=[two]"]
    );
}

#[test]
fn env_file_trailing_whitespace_is_trimmed() {
    let p = dump_project(&["T", "QT", "TAB"]);
    p.global_env("T=value   \nQT=\"  inner  \"  \t\nTAB=x\t\n");
    assert_eq!(seen(&p), ["T=[value]", "QT=[  inner  ]", "TAB=[x]"]);
}

#[test]
fn env_file_matched_quotes_are_stripped() {
    let p = dump_project(&["DQ", "SQ", "EQ", "INNER", "OTHER"]);
    p.global_env(
        "DQ=\"double quoted\"\nSQ='single quoted'\nEQ=\"\"\nINNER=\"a\"b\"\nOTHER='say \"hi\"'\n",
    );
    assert_eq!(
        seen(&p),
        [
            "DQ=[double quoted]",
            "SQ=[single quoted]",
            "EQ=[]",
            "INNER=[a\"b]",
            "OTHER=[say \"hi\"]",
        ]
    );
}

#[test]
fn env_file_unmatched_quotes_are_kept_literally() {
    let p = dump_project(&["U1", "U2", "U3", "U4", "U5"]);
    p.global_env("U1=\"hello\nU2='world\nU3=\"x'\nU4=\"\nU5=x\"\n");
    assert_eq!(
        seen(&p),
        [
            "U1=[\"hello]",
            "U2=['world]",
            "U3=[\"x']",
            "U4=[\"]",
            "U5=[x\"]",
        ]
    );
}

#[test]
fn env_file_has_no_escape_sequences() {
    let p = dump_project(&["E1", "E2", "E3", "E4"]);
    p.global_env("E1=\"\\n\\t\"\nE2='\\\\'\nE3=a\\ b\nE4=$HOME\n");
    assert_eq!(
        seen(&p),
        ["E1=[\\n\\t]", "E2=[\\\\]", "E3=[a\\ b]", "E4=[$HOME]"]
    );
}

#[test]
fn env_file_invalid_lines_warn_naming_file_and_line_and_are_skipped() {
    let body = "GOOD=1\nnoequals\n1BAD=val\nKEY WITH SPACES=val\nSPACED =v\n-X=1\nOK=2\n";
    let p = dump_project(&["GOOD", "OK", "SPACED", "KEY"]);
    p.global_env(body).file("local.env", body);
    let out = p
        .loopx(&["run", "-n", "1", "-e", "local.env", "ralph"])
        .stdout("")
        .stderr_contains("ignoring line")
        .run();
    assert_eq!(
        dumped(&p),
        ["GOOD=[1]", "OK=[2]", "SPACED unset", "KEY unset"]
    );
    for file in [p.global_env_path(), p.path("local.env")] {
        for line in 2..=6 {
            let at = format!("{}:{line}", file.display());
            assert!(out.stderr.contains(&at), "no warning at {at}\n{out}");
        }
        for line in [1, 7] {
            let at = format!("{}:{line}", file.display());
            assert!(!out.stderr.contains(&at), "a warning at {at}\n{out}");
        }
    }
    assert_eq!(out.stderr.lines().count(), 10, "{}", out.stderr);
    assert!(
        out.stderr.lines().all(|l| l.contains("warning")),
        "{}",
        out.stderr
    );
}

#[test]
fn env_file_warnings_are_printed_once_per_run() {
    let p = Project::new();
    p.script(
        "ralph",
        "index.sh",
        "echo x >> \"$LOOPX_PROJECT_ROOT/log\"\n",
    );
    p.global_env("not a line\n");
    let warning = format!(
        "loopx: warning: {}:1: ignoring line: it has no '=' (expected KEY=VALUE)\n",
        p.global_env_path().display()
    );
    p.loopx(&["run", "-n", "3", "ralph"]).stderr(&warning).run();
    assert_eq!(p.read("log"), "x\nx\nx\n");
}

// ------------------------------------------------ §8.1 global file location

#[test]
fn global_env_file_is_read_from_xdg_config_home() {
    let p = dump_project(&["WHERE"]);
    // ~/.config/loopx/env holds a different value, which must lose.
    p.global_env("WHERE=home\n");
    let xdg = TempDir::new("xdg");
    fs::create_dir_all(xdg.path().join("loopx")).expect("mkdir");
    fs::write(xdg.path().join("loopx/env"), "WHERE=xdg\n").expect("write");
    let seen = run_dump(&p, &[], |r| r.env("XDG_CONFIG_HOME", xdg.path()));
    assert_eq!(seen, ["WHERE=[xdg]"]);
}

#[test]
fn global_env_file_defaults_to_home_config_when_xdg_config_home_is_unset() {
    let p = dump_project(&["WHERE"]);
    fs::create_dir_all(p.home().join(".config/loopx")).expect("mkdir");
    fs::write(p.home().join(".config/loopx/env"), "WHERE=home\n").expect("write");
    let seen = run_dump(&p, &[], |r| r.env_remove("XDG_CONFIG_HOME"));
    assert_eq!(seen, ["WHERE=[home]"]);

    // The env subcommands use the same default location.
    p.loopx(&["env", "set", "SET_HERE", "1"])
        .env_remove("XDG_CONFIG_HOME")
        .run();
    assert_eq!(
        fs::read_to_string(p.home().join(".config/loopx/env")).expect("read"),
        "WHERE=home\nSET_HERE=\"1\"\n"
    );
    p.loopx(&["env", "list"])
        .env_remove("XDG_CONFIG_HOME")
        .stdout("SET_HERE=1\nWHERE=home\n")
        .run();
}

#[test]
fn missing_global_env_file_means_no_variables() {
    let p = dump_project(&["UNSET_ANYWHERE"]);
    assert!(!p.global_env_path().exists());
    p.loopx(&["run", "ralph"]).stdout("").run();
    assert_eq!(dumped(&p), ["UNSET_ANYWHERE unset"]);
}

#[test]
fn unreadable_global_env_file_fails_the_run() {
    let p = dump_project(&["A"]);
    p.global_env("A=1\n");
    let path = p.global_env_path();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).expect("chmod");
    if fs::read(&path).is_ok() {
        // Running as root: permissions do not stop reads. The directory
        // variant below covers the same clause.
        eprintln!("note: skipping the chmod 000 check, the file is still readable (root?)");
        return;
    }
    p.loopx(&["run", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains(&path.display().to_string())
        .run();
    assert!(!p.exists("vars"), "no script may run");
}

#[test]
fn global_env_file_that_cannot_be_read_fails_run_and_env_commands() {
    // A directory where the file should be: it exists, but reading it fails
    // (EISDIR), even for root.
    let p = dump_project(&["A"]);
    let path = p.global_env_path();
    fs::create_dir_all(&path).expect("mkdir");
    let shown = path.display().to_string();
    for args in [
        &["run", "ralph"][..],
        &["run", "-n", "0", "ralph"],
        &["env", "list"],
        &["env", "set", "A", "1"],
        &["env", "remove", "A"],
    ] {
        p.loopx(args)
            .status(1)
            .stdout("")
            .stderr_contains(&shown)
            .run();
    }
    assert!(!p.exists("vars"), "no script may run");
    assert!(path.is_dir(), "the directory is left alone");
}

// ---------------------------------------------------------------- §8.2 -e

#[test]
fn local_env_file_path_is_relative_to_the_project_root() {
    let p = dump_project(&["L"]);
    p.file("conf/local.env", "L=root\n")
        // The same relative path inside the workflow directory (the
        // scripts' cwd) must not be the one read.
        .file(".loopx/ralph/conf/local.env", "L=workflow\n");
    assert_eq!(run_dump(&p, &["-e", "conf/local.env"], |r| r), ["L=[root]"]);
}

#[test]
fn local_env_file_absolute_path_is_used_as_is() {
    let p = dump_project(&["L"]);
    let elsewhere = TempDir::new("elsewhere");
    let file = elsewhere.path().join("abs.env");
    fs::write(&file, "L=absolute\n").expect("write");
    let arg = file.display().to_string();
    assert_eq!(run_dump(&p, &["-e", &arg], |r| r), ["L=[absolute]"]);
}

#[test]
fn missing_local_env_file_fails_naming_the_path() {
    let p = dump_project(&["L"]);
    for args in [
        &["run", "-e", "missing.env", "ralph"][..],
        &["run", "-e", "sub/missing.env", "-n", "3", "ralph"],
    ] {
        p.loopx(args)
            .status(1)
            .stdout("")
            .stderr_contains(args[2])
            .run();
    }
    assert!(!p.exists("vars"), "no script may run");
}

#[test]
fn local_env_file_that_cannot_be_read_fails() {
    let p = dump_project(&["L"]);
    p.dir("env.d");
    p.loopx(&["run", "-e", "env.d", "ralph"])
        .status(1)
        .stdout("")
        .stderr_contains("env.d")
        .run();
    assert!(!p.exists("vars"));
}

// ------------------------------------ env files that are pipes or devices

/// `mkfifo <path>`.
fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Whether `pid` has `path` open.
fn has_open(pid: i32, path: &std::path::Path) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|t| t == path))
}

#[test]
fn env_file_fifo_without_a_writer_ends_promptly_on_sigint_and_sigterm() {
    // §7.3 exit codes. The handlers are installed with SA_RESTART before
    // the env files are read: a plain read of this fifo would be restarted
    // after each signal and only SIGKILL would end loopx.
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let p = dump_project(&["A"]);
        let fifo = p.path("secrets.fifo");
        mkfifo(&fifo);
        let mut run = p
            .loopx(&["run", "-e", "secrets.fifo", "ralph"])
            .status(code)
            .stdout("")
            .timeout(std::time::Duration::from_secs(30))
            .start();
        // Waiting in the read: the fifo is open (without O_NONBLOCK, open
        // itself would wait for a writer, and never show up here).
        let deadline = std::time::Instant::now() + procs::READY_TIMEOUT;
        while !has_open(run.pid(), &fifo) {
            if std::time::Instant::now() > deadline {
                let _ = run.child.kill();
                let _ = run.child.wait();
                panic!("signal {sig}: loopx never opened {}", fifo.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let sent = std::time::Instant::now();
        run.signal(sig);
        let pid = run.pid();
        run.finish();
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(10),
            "signal {sig}: loopx took {:?} to end",
            sent.elapsed()
        );
        procs::assert_group_gone(pid);
        assert!(!p.exists("vars"), "no script may run");
    }
}

#[test]
fn env_file_from_a_pipe_is_read() {
    // `-e <(secret-tool lookup ...)`: bash hands loopx /dev/fd/N, a pipe.
    let p = dump_project(&["A", "G"]);
    p.global_env(
        "G=global
",
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg("\"$0\" run -e <(printf 'A=1\\n') ralph")
        .arg(loopx_bin())
        .current_dir(p.root());
    isolate(&mut cmd, p.home());
    Run::command(cmd).stdout("").run();
    assert_eq!(dumped(&p), ["A=[1]", "G=[global]"]);
}

/// Caps the child's address space: on a loopx that reads /dev/zero without
/// a limit, the test fails on an allocation instead of eating the machine.
fn with_memory_cap(mut run: Run) -> Run {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; it changes only the child.
    unsafe {
        run.cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    run
}

#[test]
fn env_file_over_8_mib_fails_naming_the_file_and_the_limit() {
    let p = dump_project(&["A"]);
    // 9 MiB of comment lines: valid, and never read whole.
    let line = format!("#{}\n", "x".repeat(1023));
    let big = line.repeat(9 * 1024);
    p.file("big.env", &big);
    let global = p.global_env_path();
    let cases: [(&str, Vec<&str>, String); 4] = [
        (
            "a device as -e",
            vec!["run", "-e", "/dev/zero", "ralph"],
            "/dev/zero".into(),
        ),
        (
            "a 9 MiB -e",
            vec!["run", "-e", "big.env", "ralph"],
            p.path("big.env").display().to_string(),
        ),
        (
            "a 9 MiB global file",
            vec!["run", "ralph"],
            global.display().to_string(),
        ),
        (
            "a 9 MiB global file, env list",
            vec!["env", "list"],
            global.display().to_string(),
        ),
    ];
    for (what, args, file) in cases {
        if what.contains("global") {
            p.global_env(&big);
        }
        let out = with_memory_cap(p.loopx(&args))
            .status(1)
            .stdout("")
            .stderr_contains(&format!("loopx: error: cannot read env file {file}: "))
            .stderr_contains("larger than 8 MiB")
            .run();
        assert_eq!(out.stderr.lines().count(), 1, "{what}\n{out}");
        assert!(!p.exists("vars"), "{what}: no script may run");
    }
}

// ---------------------------------------------------------- §8.3 injection

#[test]
fn inherited_environment_passes_through() {
    let p = dump_project(&["FROM_SYSTEM"]);
    let seen = run_dump(&p, &[], |r| r.env("FROM_SYSTEM", "sys"));
    assert_eq!(seen, ["FROM_SYSTEM=[sys]"]);
}

#[test]
fn global_env_overrides_inherited_environment() {
    let p = dump_project(&["V"]);
    p.global_env("V=global\n");
    assert_eq!(run_dump(&p, &[], |r| r.env("V", "sys")), ["V=[global]"]);
}

#[test]
fn local_env_file_overrides_global() {
    let p = dump_project(&["V", "ONLY_GLOBAL", "ONLY_LOCAL"]);
    p.global_env("V=global\nONLY_GLOBAL=g\n")
        .file("local.env", "V=local\nONLY_LOCAL=l\n");
    assert_eq!(
        run_dump(&p, &["-e", "local.env"], |r| r.env("V", "sys")),
        ["V=[local]", "ONLY_GLOBAL=[g]", "ONLY_LOCAL=[l]"]
    );
}

#[test]
fn local_env_file_overrides_inherited_environment() {
    let p = dump_project(&["V"]);
    p.file("local.env", "V=local\n");
    assert_eq!(
        run_dump(&p, &["-e", "local.env"], |r| r.env("V", "sys")),
        ["V=[local]"]
    );
}

/// The values loopx itself injects for `ralph:index` of `p`.
fn loopx_vars(p: &Project) -> Vec<String> {
    let bin = fs::canonicalize(loopx_bin()).expect("canonicalize binary");
    vec![
        format!("LOOPX_BIN=[{}]", bin.display()),
        format!("LOOPX_PROJECT_ROOT=[{}]", p.root().display()),
        "LOOPX_WORKFLOW=[ralph]".to_string(),
    ]
}

const LOOPX_NAMES: [&str; 3] = ["LOOPX_BIN", "LOOPX_PROJECT_ROOT", "LOOPX_WORKFLOW"];

#[test]
fn loopx_variables_cannot_be_overridden_by_env_files() {
    let p = dump_project(&LOOPX_NAMES);
    let bogus = "LOOPX_BIN=/bogus/bin\nLOOPX_PROJECT_ROOT=/bogus/root\nLOOPX_WORKFLOW=bogus\n";
    p.global_env(bogus).file("local.env", bogus);
    assert_eq!(run_dump(&p, &["-e", "local.env"], |r| r), loopx_vars(&p));
}

#[test]
fn loopx_variables_cannot_be_overridden_by_inherited_environment() {
    let p = dump_project(&LOOPX_NAMES);
    let seen = run_dump(&p, &[], |r| {
        r.env("LOOPX_BIN", "/bogus/bin")
            .env("LOOPX_PROJECT_ROOT", "/bogus/root")
            .env("LOOPX_WORKFLOW", "bogus")
    });
    assert_eq!(seen, loopx_vars(&p));
}

#[test]
fn env_files_are_loaded_once_per_run() {
    let p = Project::new();
    // Each iteration records G and L, then rewrites both env files.
    p.script(
        "ralph",
        "index.sh",
        "set -e\necho \"$G $L\" >> \"$LOOPX_PROJECT_ROOT/log\"\n\
         \"$LOOPX_BIN\" env set G changed\n\
         echo L=changed > \"$LOOPX_PROJECT_ROOT/local.env\"\n",
    );
    p.global_env("G=original\n")
        .file("local.env", "L=original\n");
    p.loopx(&["run", "-n", "3", "-e", "local.env", "ralph"])
        .run();
    assert_eq!(
        p.read("log"),
        "original original\noriginal original\noriginal original\n"
    );
    // The edits did land, and the next run sees them.
    p.loopx(&["run", "-n", "1", "-e", "local.env", "ralph"])
        .run();
    assert!(
        p.read("log").ends_with("\nchanged changed\n"),
        "{}",
        p.read("log")
    );
}

/// CPU seconds `cmd` used, its children included, and its exit status:
/// CPU time, not wall time, so a busy machine does not skew a comparison.
// The child is reaped by wait4, which std does not know about.
#[allow(clippy::zombie_processes)]
fn cpu_seconds(cmd: &mut std::process::Command) -> (f64, i32) {
    let child = cmd.spawn().expect("spawn loopx");
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime) + secs(usage.ru_stime), status)
}

#[test]
fn many_env_file_variables_cost_linear_time() {
    // §8.3 merges the env files over the inherited environment. The merge
    // was quadratic: 40k variables from -e took ~16x the CPU of 10k. The
    // script is a .js whose `node` is /bin/true: bash itself imports an
    // environment in quadratic time, which is not loopx's to measure.
    let p = Project::new();
    p.script("many", "index.js", "");
    let bin = p.path("bin");
    fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink("/bin/true", bin.join("node")).expect("symlink");
    for n in [10_000, 40_000] {
        let body: String = (0..n).map(|i| format!("VAR_{i}=value_{i}\n")).collect();
        p.file(&format!("{n}.env"), &body);
    }
    let cpu = |n: usize| -> f64 {
        // The least of three: a run slowed by something else only counts
        // if all three were.
        (0..3)
            .map(|_| {
                let mut cmd = std::process::Command::new(loopx_bin());
                cmd.args(["run", "-n", "1", "-e", &format!("{n}.env"), "many"])
                    .current_dir(p.root())
                    .env("PATH", &bin)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(fs::File::create(p.path("stderr")).expect("create"));
                isolate(&mut cmd, p.home());
                let (secs, status) = cpu_seconds(&mut cmd);
                assert_eq!(status, 0, "{n} variables: wait status {status}");
                assert_eq!(p.read("stderr"), "", "{n} variables: stderr");
                secs
            })
            .fold(f64::INFINITY, f64::min)
    };
    let (small, large) = (cpu(10_000), cpu(40_000));
    assert!(
        large < 10.0 * small.max(0.001),
        "40k variables took {large:.3} s of CPU, 10k {small:.3} s: not linear"
    );
}

// ------------------------------------------------------ §4.3 env commands

fn global_text(p: &Project) -> String {
    fs::read_to_string(p.global_env_path()).expect("read global env")
}

#[test]
fn env_set_rejects_invalid_names() {
    let p = Project::bare();
    for name in ["1BAD", "A-B", "", "A B", "A.B", "É", "-x", "A=B"] {
        p.loopx(&["env", "set", name, "v"])
            .status(1)
            .stdout("")
            .stderr_contains(&format!("'{name}'"))
            .run();
    }
    assert!(!p.global_env_path().exists(), "nothing written");
}

#[test]
fn env_set_accepts_valid_names() {
    let p = Project::bare();
    for name in ["A", "_", "a_1", "_X9", "lower", "MiXeD_09"] {
        p.loopx(&["env", "set", name, "v"]).stdout("").run();
    }
    p.loopx(&["env", "list"])
        .stdout("A=v\nMiXeD_09=v\n_=v\n_X9=v\na_1=v\nlower=v\n")
        .run();
}

#[test]
fn env_set_rejects_values_with_line_breaks() {
    let p = Project::bare();
    p.global_env("KEEP=1\n");
    for value in ["a\nb", "a\rb", "\n", "trailing\r\n", "\r"] {
        p.loopx(&["env", "set", "K", value])
            .status(1)
            .stdout("")
            .stderr_contains("'K'")
            .run();
    }
    assert_eq!(global_text(&p), "KEEP=1\n", "file unchanged");
}

#[test]
fn env_set_serializes_as_key_equals_quoted_literal() {
    let p = Project::bare();
    p.loopx(&["env", "set", "K", "a b"]).run();
    assert_eq!(global_text(&p), "K=\"a b\"\n");
    p.loopx(&["env", "set", "Q", "say \"hi\" \\n"]).run();
    assert_eq!(global_text(&p), "K=\"a b\"\nQ=\"say \"hi\" \\n\"\n");
}

#[test]
fn env_set_round_trips_awkward_values() {
    let values = [
        "with spaces",
        "#hash",
        "a # b",
        "a=b=c",
        "\"double\"",
        "'single'",
        "\"",
        "'",
        "trailing  ",
        "  leading",
        "\\n\\t",
        "$HOME ${X} `id`",
        "",
        "-dash",
        "--",
        "ünïcödé ☃",
        "\t tab",
    ];
    let p = Project::new();
    let mut names = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let name = format!("V{i:02}");
        p.loopx(&["env", "set", &name, v]).run();
        names.push(name);
    }
    // Through `env list`...
    let expected: String = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("V{i:02}={v}\n"))
        .collect();
    p.loopx(&["env", "list"]).stdout(&expected).run();
    // ...and as scripts see them.
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    p.script("ralph", "index.sh", &dump_script(&refs));
    let seen: Vec<String> = values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("V{i:02}=[{v}]"))
        .collect();
    assert_eq!(run_dump(&p, &[], |r| r), seen);
}

#[test]
fn env_set_replaces_an_existing_value() {
    let p = Project::bare();
    p.loopx(&["env", "set", "K", "one"]).run();
    p.loopx(&["env", "set", "K", "two"]).run();
    assert_eq!(global_text(&p), "K=\"two\"\n");
    p.loopx(&["env", "list"]).stdout("K=two\n").run();
}

#[test]
fn env_set_creates_the_config_directory() {
    let p = Project::bare();
    let dir = p.global_env_path().parent().expect("parent").to_path_buf();
    assert!(!dir.exists());
    p.loopx(&["env", "set", "K", "v"]).stdout("").run();
    assert!(dir.is_dir());
    assert_eq!(global_text(&p), "K=\"v\"\n");

    // Also when the whole XDG_CONFIG_HOME does not exist yet.
    let xdg = TempDir::new("xdg-new");
    let cfg = xdg.path().join("does/not/exist");
    p.loopx(&["env", "set", "K", "v"])
        .env("XDG_CONFIG_HOME", &cfg)
        .run();
    assert_eq!(
        fs::read_to_string(cfg.join("loopx/env")).expect("read"),
        "K=\"v\"\n"
    );
}

#[test]
fn env_set_preserves_unrelated_lines_and_comments() {
    let p = Project::bare();
    let original =
        "# my settings\nA=1\n\n  # indented comment\nK=old\nnot a valid line\nB='two'\nK=older\n";
    p.global_env(original);
    p.loopx(&["env", "set", "K", "new"]).stdout("").run();
    let text = global_text(&p);
    let others = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with("K="))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(others(&text), others(original), "{text}");
    let k: Vec<&str> = text.lines().filter(|l| l.starts_with("K=")).collect();
    assert_eq!(k, ["K=\"new\""], "{text}");
    p.loopx(&["env", "list"])
        .stdout("A=1\nB=two\nK=new\n")
        .stderr_contains(":6: ignoring line")
        .run();
}

#[test]
fn env_remove_deletes_the_variable() {
    let p = Project::bare();
    p.global_env("# keep me\nA=1\nB=2\nA=again\n");
    p.loopx(&["env", "remove", "A"]).stdout("").run();
    assert_eq!(global_text(&p), "# keep me\nB=2\n");
    p.loopx(&["env", "list"]).stdout("B=2\n").run();
}

#[test]
fn env_remove_of_a_missing_name_is_a_silent_noop() {
    // No file at all: nothing is created.
    let p = Project::bare();
    p.loopx(&["env", "remove", "NOPE"]).stdout("").run();
    assert!(!p.global_env_path().exists());

    // A file without the name: left byte for byte as it was.
    let original = "# c\nA=1\n\nB = spaced\n";
    p.global_env(original);
    p.loopx(&["env", "remove", "NOPE"]).stdout("").run();
    assert_eq!(global_text(&p), original);
}

#[test]
fn env_list_is_sorted_by_key() {
    let p = Project::bare();
    for (k, v) in [
        ("c", "3"),
        ("B", "2"),
        ("_u", "u"),
        ("a", "1"),
        ("A", "0"),
        ("AA", "00"),
    ] {
        p.loopx(&["env", "set", k, v]).run();
    }
    p.loopx(&["env", "list"])
        .stdout("A=0\nAA=00\nB=2\n_u=u\na=1\nc=3\n")
        .run();
}

#[test]
fn env_list_shows_hand_edited_files_as_loaded() {
    let p = Project::bare();
    p.global_env("Z='quoted'\nA=first\n# c\nA=last  \n");
    p.loopx(&["env", "list"]).stdout("A=last\nZ=quoted\n").run();
}

#[test]
fn env_list_is_empty_when_nothing_is_set() {
    let p = Project::bare();
    p.loopx(&["env", "list"]).stdout("").run();
    p.global_env("# only a comment\n\n");
    p.loopx(&["env", "list"]).stdout("").run();
    // After removing the last variable.
    p.loopx(&["env", "set", "K", "v"]).run();
    p.loopx(&["env", "remove", "K"]).run();
    p.loopx(&["env", "list"]).stdout("").run();
}

#[test]
fn global_env_file_home_comes_from_the_password_database_without_home() {
    // §8.1 `~/.config`: with neither XDG_CONFIG_HOME nor HOME set, `~` is the
    // user's home directory from the password database (as Node's
    // os.homedir()), not an error.
    let p = dump_project(&["V"]);
    let seen = run_dump(&p, &["-n", "1"], |r| {
        r.env_remove("HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("V", "sys")
    });
    assert_eq!(seen, ["V=[sys]"]);
}

#[test]
fn env_file_crlf_line_endings_are_read_like_lf() {
    let p = dump_project(&["A", "B", "C"]);
    p.global_env("# windows\r\nA=1\r\nB=\"two words\"\r\n\r\nC='3'\r\n");
    p.loopx(&["run", "ralph"]).run();
    assert_eq!(dumped(&p), ["A=[1]", "B=[two words]", "C=[3]"]);
}

#[test]
fn env_file_leading_byte_order_mark_is_ignored() {
    let p = dump_project(&["FIRST", "SECOND"]);
    p.global_env("\u{feff}FIRST=1\nSECOND=2\n")
        .file("local.env", "\u{feff}SECOND=local\n");
    p.loopx(&["run", "-e", "local.env", "ralph"]).run();
    assert_eq!(dumped(&p), ["FIRST=[1]", "SECOND=[local]"]);
    // env set/remove find the first variable too.
    p.loopx(&["env", "remove", "FIRST"]).run();
    p.loopx(&["env", "list"]).stdout("SECOND=2\n").run();
}

#[test]
fn env_file_export_prefix_and_indented_keys_are_invalid_lines() {
    // §8.1: the key is everything before the first '=', so these keys are
    // not [A-Za-z_][A-Za-z0-9_]*. The warning names the key and what to fix.
    let p = dump_project(&["A", "B", "C"]);
    p.global_env("export A=1\n  B=2\nC\t=3\n");
    let file = p.global_env_path().display().to_string();
    p.loopx(&["run", "ralph"])
        .stderr(&format!(
            "loopx: warning: {file}:1: ignoring line: 'export' before A; \
             env files are plain KEY=VALUE lines, drop 'export'\n\
             loopx: warning: {file}:2: ignoring line: whitespace around the key B; \
             write B=VALUE with none before the key or '='\n\
             loopx: warning: {file}:3: ignoring line: whitespace around the key C; \
             write C=VALUE with none before the key or '='\n"
        ))
        .run();
    assert_eq!(dumped(&p), ["A unset", "B unset", "C unset"]);
}

#[test]
fn env_file_warnings_never_print_a_value() {
    // Warnings go to CI and cron logs on every run: a secret in a line
    // loopx ignores must not be in them, whatever the mistake.
    let p = dump_project(&["OPENAI_API_KEY"]);
    let secret = "sk-live-0123456789abcdef";
    let body =
        format!("export OPENAI_API_KEY={secret}\n{secret}\nBearer {secret}=x\nK =\"{secret}\"\n");
    p.global_env(&body).file("local.env", &body);
    let global = p.global_env_path().display().to_string();
    let local = p.path("local.env").display().to_string();
    for run in [
        p.loopx(&["run", "-e", "local.env", "ralph"]).stdout(""),
        p.loopx(&["env", "list"]).stdout(""),
    ] {
        let out = run
            .stderr_contains(&format!(
                "{global}:1: ignoring line: 'export' before OPENAI_API_KEY"
            ))
            .stderr_contains(&format!("{global}:2: ignoring line: it has no '='"))
            .stderr_contains(&format!(
                "{global}:3: ignoring line: the text before '=' is not a valid key"
            ))
            .stderr_contains(&format!(
                "{global}:4: ignoring line: whitespace around the key K;"
            ))
            .stderr_lacks("sk-live")
            .stderr_lacks("Bearer")
            .run();
        let lines = out.stderr.lines().count();
        assert!(lines == 4 || lines == 8, "{out}");
        if lines == 8 {
            assert!(
                out.stderr
                    .contains(&format!("{local}:1: ignoring line: 'export' before")),
                "{out}"
            );
        }
    }
    assert_eq!(dumped(&p), ["OPENAI_API_KEY unset"]);
}

#[test]
fn env_file_warnings_stop_after_twenty_per_file() {
    let p = dump_project(&["A"]);
    p.global_env(&format!("{}A=1\n", "not a line\n".repeat(25)));
    let file = p.global_env_path().display().to_string();
    let mut want = String::new();
    for n in 1..=20 {
        want.push_str(&format!(
            "loopx: warning: {file}:{n}: ignoring line: it has no '=' (expected KEY=VALUE)\n"
        ));
    }
    want.push_str(&format!(
        "loopx: warning: {file}: 5 more lines ignored without a valid KEY=VALUE\n"
    ));
    assert_eq!(run_dump(&p, &[], |r| r.stderr(&want)), ["A=[1]"]);
}

#[test]
fn env_file_values_are_trimmed_of_unicode_trailing_whitespace() {
    // "Trimmed of trailing whitespace" as JS trimEnd: NBSP, ideographic
    // space and U+FEFF go, NEL (U+0085, not JS whitespace) stays, and so
    // does leading whitespace.
    let p = dump_project(&["A", "B", "C"]);
    p.global_env("A=x\u{a0}\u{3000}\u{feff} \nB=\u{a0}y\nC=z\u{85}\n");
    assert_eq!(seen(&p), ["A=[x]", "B=[\u{a0}y]", "C=[z\u{85}]"]);
}

#[test]
fn env_command_usage_errors() {
    // §4.3 grammar: set <name> <value>, remove <name>, list. Each mistake is
    // a usage error (exit 1, one line and a hint) and leaves the file alone.
    let p = Project::bare();
    p.global_env("KEEP=1\n");
    for (args, needle) in [
        (&["env"][..], "env command"),
        (&["env", "frob"], "'frob'"),
        (&["env", "set"], "no arguments"),
        (&["env", "set", "K"], "got 1 argument"),
        (&["env", "set", "K", "v", "extra"], "got 3 arguments"),
        (&["env", "remove"], "no arguments"),
        (&["env", "remove", "A", "B"], "got 2 arguments"),
        (&["env", "list", "extra"], "'extra'"),
    ] {
        p.loopx(args).usage_error(needle, "loopx env --help").run();
    }
    assert_eq!(global_text(&p), "KEEP=1\n");
}

#[test]
fn local_env_file_path_may_be_non_utf8() {
    // -e takes a path, not text: its bytes reach the file system unchanged.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let p = dump_project(&["L"]);
    let name = OsStr::from_bytes(b"loc\xe9.env");
    fs::write(p.root().join(name), "L=latin1 name\n").expect("write");
    let _ = fs::remove_file(p.path("vars"));
    let mut r = p.loopx(&["run", "ralph", "-e"]);
    r.cmd.arg(name);
    r.stdout("").run();
    assert_eq!(dumped(&p), ["L=[latin1 name]"]);
}

#[test]
fn env_file_line_with_a_nul_byte_is_warned_and_skipped() {
    // No environment variable can hold NUL: the line is unusable, so it is
    // reported and skipped like an invalid line instead of failing the
    // script's start.
    let p = dump_project(&["A", "B"]);
    p.file("local.env", "A=x\0y\nB=1\n");
    let out = p
        .loopx(&["run", "-e", "local.env", "ralph"])
        .stdout("")
        .stderr_contains("local.env:1: ignoring line: the value of A holds a NUL byte")
        .stderr_lacks("x\\u{0}y")
        .run();
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert_eq!(dumped(&p), ["A unset", "B=[1]"]);
}

#[test]
fn env_set_and_remove_leave_other_lines_byte_for_byte() {
    // Line endings, a BOM and non-UTF-8 bytes in lines loopx does not touch
    // stay as the user wrote them.
    let p = Project::bare();
    let path = p.global_env_path();
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let original: &[u8] = b"\xef\xbb\xbf# caf\xe9\r\nA=1\r\nB=2";
    fs::write(&path, original).expect("write");
    p.loopx(&["env", "set", "C", "3"]).run();
    assert_eq!(
        fs::read(&path).expect("read"),
        [original, b"\nC=\"3\"\n"].concat()
    );
    p.loopx(&["env", "set", "A", "one"]).run();
    p.loopx(&["env", "remove", "C"]).run();
    assert_eq!(
        fs::read(&path).expect("read"),
        b"\xef\xbb\xbf# caf\xe9\r\nA=\"one\"\nB=2\n".to_vec()
    );
    p.loopx(&["env", "list"]).stdout("A=one\nB=2\n").run();
}

#[test]
fn env_set_keeps_the_files_permissions_and_creates_a_private_one() {
    let mode = |p: &Project| {
        fs::metadata(p.global_env_path())
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    };
    // A new file may hold API keys: readable by the user only.
    let p = Project::bare();
    p.loopx(&["env", "set", "K", "v"]).run();
    assert_eq!(mode(&p), 0o600);
    // An existing file keeps the mode its owner chose.
    for m in [0o600, 0o640, 0o644] {
        let p = Project::bare();
        p.global_env("A=1\n");
        fs::set_permissions(p.global_env_path(), fs::Permissions::from_mode(m)).expect("chmod");
        p.loopx(&["env", "set", "K", "v"]).run();
        assert_eq!(mode(&p), m);
        p.loopx(&["env", "remove", "A"]).run();
        assert_eq!(mode(&p), m);
    }
}

#[test]
fn env_set_and_remove_clear_temporary_copies_a_killed_writer_left() {
    // A writer SIGKILLed between writing its copy and renaming it leaves
    // `.env.tmp.<pid>`, a full copy of the secrets. Writers hold the lock
    // while they write, so one seen under the lock is stale.
    let p = Project::bare();
    p.global_env("A=1\n");
    let dir = p.global_env_path().parent().expect("dir").to_path_buf();
    for args in [&["env", "set", "B", "2"][..], &["env", "remove", "A"]] {
        let stale = [dir.join(".env.tmp.4194000"), dir.join(".env.tmp.1")];
        for f in &stale {
            fs::write(f, "SECRET=sk-live-1\n").expect("plant");
        }
        let other = dir.join(".other.tmp.1");
        fs::write(&other, "x").expect("plant");
        p.loopx(args).stdout("").run();
        for f in &stale {
            assert!(!f.exists(), "{args:?} left {}", f.display());
        }
        assert!(other.exists(), "{args:?}: another file's copy is not ours");
    }
    assert_eq!(global_text(&p), "B=\"2\"\n");
}

#[test]
fn env_set_writes_through_a_symlinked_env_file() {
    let p = Project::bare();
    let dotfiles = TempDir::new("dotfiles");
    let target = dotfiles.path().join("loopx.env");
    fs::write(&target, "A=1\n").expect("write");
    let link = p.global_env_path();
    fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    p.loopx(&["env", "set", "B", "2"]).run();
    assert!(
        fs::symlink_metadata(&link)
            .expect("lstat")
            .file_type()
            .is_symlink(),
        "the link is kept"
    );
    assert_eq!(fs::read_to_string(&target).expect("read"), "A=1\nB=\"2\"\n");
    p.loopx(&["env", "list"]).stdout("A=1\nB=2\n").run();
}

/// Starts `loopx env <args>` for each argument list at once, then waits for
/// all of them.
/// Starts `loopx env <args>` for every entry at once, then expects each to
/// succeed quietly.
fn env_all_at_once(p: &Project, commands: &[Vec<String>]) {
    let running: Vec<_> = commands
        .iter()
        .map(|args| {
            let mut all = vec!["env"];
            all.extend(args.iter().map(String::as_str));
            p.loopx(&all).start()
        })
        .collect();
    for r in running {
        r.finish();
    }
}

#[test]
fn concurrent_env_set_and_remove_lose_no_update() {
    // Loops running side by side keep state through `loopx env set`: every
    // update must land, and the file must stay whole (README "Reliability").
    let p = Project::bare();
    p.global_env("# kept\nKEEP=1\n");
    let path = p.global_env_path();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).expect("chmod");
    // Long values: a torn or interleaved write would show in the lines.
    let value = |i: usize| format!("value {i} {}", "x".repeat(64 + i));
    let sets: Vec<Vec<String>> = (0..50)
        .map(|i| vec!["set".into(), format!("VAR_{i}"), value(i)])
        .collect();
    env_all_at_once(&p, &sets);
    let removes: Vec<Vec<String>> = (0..50)
        .filter(|i| i % 2 == 0)
        .map(|i| vec!["remove".into(), format!("VAR_{i}")])
        .collect();
    assert_eq!(removes.len(), 25);
    env_all_at_once(&p, &removes);

    let mut remaining: Vec<String> = (0..50)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("VAR_{i}=\"{}\"", value(i)))
        .collect();
    let text = global_text(&p);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(text.ends_with('\n'), "{text}");
    // The two original lines stay first; the rest in whatever order the
    // writers got the lock.
    assert_eq!(lines[..2], ["# kept", "KEEP=1"], "{text}");
    let mut added = lines.split_off(2);
    added.sort();
    remaining.sort();
    assert_eq!(added, remaining);
    assert_eq!(
        fs::metadata(&path).expect("stat").permissions().mode() & 0o7777,
        0o640
    );
    let listed = p
        .loopx(&["env", "list"])
        .stdout_any("26 lines, counted below")
        .run();
    assert_eq!(listed.stdout.lines().count(), 26, "{listed}");
    // No temporary file is left beside the env file.
    let dir = path.parent().expect("parent");
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["env", "env.lock"]);
}

/// Holds an exclusive flock on `path` until dropped, as another `loopx env`
/// writer would.
struct HeldLock {
    _file: fs::File,
}

impl HeldLock {
    fn take(path: &std::path::Path) -> HeldLock {
        use std::os::fd::AsRawFd;
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .expect("open lock file");
        // SAFETY: flock on a descriptor owned by `f`.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        HeldLock { _file: f }
    }
}

#[test]
fn env_set_waits_for_the_lock_and_gives_up_after_ten_seconds() {
    let p = Project::bare();
    p.global_env("A=1\n");
    let lock_path = p.global_env_path().with_file_name("env.lock");
    let held = HeldLock::take(&lock_path);

    // A writer that never lets go: after 10 s loopx says so and changes nothing.
    let start = std::time::Instant::now();
    p.loopx(&["env", "set", "B", "2"])
        .status(1)
        .stdout("")
        .stderr_contains("another loopx env command has held the lock")
        .stderr_contains("for over 10s; nothing was changed")
        .run();
    let waited = start.elapsed();
    assert!(waited >= std::time::Duration::from_secs(10), "{waited:?}");
    assert_eq!(global_text(&p), "A=1\n");

    // A writer that lets go: loopx waits for it, then writes.
    let mut running = p.loopx(&["env", "remove", "A"]).start();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        running.child.try_wait().expect("try_wait").is_none(),
        "did not wait"
    );
    assert_eq!(global_text(&p), "A=1\n");
    drop(held);
    running.finish();
    assert_eq!(global_text(&p), "");
}

/// `PROPTEST_CASES` when set (README "Development"), else `cases`.
fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    let mut config = proptest::test_runner::Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

proptest! {
    #![proptest_config(proptest_config(24))]

    /// §4.3: what `env set` stores, `env list` shows, for every valid name
    /// and every value without a line break, as the real binary does it.
    #[test]
    fn env_set_then_list_round_trips_any_valid_name_and_value(
        vars in proptest::collection::vec(
            (
                "[A-Za-z_][A-Za-z0-9_]{0,8}",
                prop_oneof![
                    any::<String>(),
                    "[ \"'#=\\\\\u{a0}\u{feff}\t-]{0,6}",
                ]
                .prop_map(|v: String| v.replace(['\n', '\r', '\0'], "")),
            ),
            1..4,
        )
    ) {
        let p = Project::bare();
        let mut want = std::collections::BTreeMap::new();
        for (name, value) in &vars {
            let o = p.loopx(&["env", "set", name, value]).run();
            prop_assert_eq!(o.code, Some(0), "{}", o.stderr);
            want.insert(name.clone(), value.clone());
        }
        let listed: String = want.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        p.loopx(&["env", "list"]).stdout(&listed).run();
        for name in want.keys() {
            prop_assert_eq!(p.loopx(&["env", "remove", name]).run().code, Some(0));
        }
        prop_assert_eq!(p.loopx(&["env", "list"]).run().stdout, "");
    }
}
