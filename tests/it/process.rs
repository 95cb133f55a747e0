//! The process layer beyond signals: stdout and stdin of any size (§6.2,
//! §6.6), a background process holding stdout, scripts killed by a signal or
//! vanished mid-loop (§7.2, §5.1), no leaked fds, memory or zombies over long
//! runs, a closed stderr, and a script that reads the terminal (README,
//! "Signals and process groups").

use crate::util::procs;
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;
use procs::*;

const MIB: usize = 1024 * 1024;

/// A script printing `{"goto":"<goto>","result":"aaa…"}` with `n` bytes of
/// result. `mid` runs halfway through the result.
fn big_result_script(n: usize, goto: &str, mid: &str) -> String {
    let half = n / 2;
    format!(
        "printf '{{\"goto\":\"{goto}\",\"result\":\"'\n\
         head -c {half} /dev/zero | tr '\\0' a\n\
         {mid}\n\
         head -c {} /dev/zero | tr '\\0' a\n\
         printf '\"}}'\n",
        n - half
    )
}

/// `kB` value of a `/proc/<pid>/status` line as saved by a script.
fn kb(p: &Project, rel: &str) -> u64 {
    let text = p.read(rel);
    text.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{rel}: {text:?}"))
}

#[test]
fn stdout_of_256_mib_is_captured_while_stderr_flows_live() {
    // Halfway through its stdout the script writes a marker to stderr and
    // waits until the test has seen it on loopx's stderr: stderr passes
    // through while stdout is being captured. The next script gets the whole
    // result on stdin (§6.6) and measures it.
    let n = 256 * MIB;
    let p = Project::new();
    let seen = p.path("seen");
    p.script(
        "w",
        "index.sh",
        &big_result_script(
            n,
            "check",
            "echo HALFWAY >&2\nuntil [ -e \"$LOOPX_PROJECT_ROOT/seen\" ]; do sleep 0.02; done",
        ),
    )
    .script(
        "w",
        "check.sh",
        "tr -d a | wc -c > \"$LOOPX_PROJECT_ROOT/other\"\n\
         printf '{\"stop\":true}'\n",
    );
    let mut run = p.loopx(&["run", "w"]).start();
    let stderr = run.child.stderr.take().expect("stderr");
    let reader = thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.expect("stderr line");
            if line == "HALFWAY" {
                fs::write(&seen, "1").expect("write seen");
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let status = run.child.wait().expect("wait");
    let stderr = reader.join().expect("stderr thread");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "HALFWAY\n");
    assert_eq!(
        p.read("other").trim(),
        "0",
        "only the result's bytes arrived"
    );

    // The byte count, separately (wc over the same stdin), and loopx's peak
    // RSS so far: the captured stdout and the result decoded from it share
    // one buffer (about one copy).
    let p2 = Project::new();
    p2.script("w", "index.sh", &big_result_script(n, "check", ""))
        .script(
            "w",
            "check.sh",
            "wc -c > \"$LOOPX_PROJECT_ROOT/size\"\n\
             grep VmHWM /proc/$PPID/status > \"$LOOPX_PROJECT_ROOT/hwm\"\n\
             printf '{\"stop\":true}'\n",
        );
    p2.loopx(&["run", "w"]).stdout("").run();
    assert_eq!(p2.read("size").trim(), n.to_string());
    let hwm = kb(&p2, "hwm") * 1024;
    assert!(
        hwm < (n as u64) * 3 / 2,
        "peak RSS {} MiB for a 256 MiB structured result",
        hwm / MIB as u64
    );
}

#[test]
fn capturing_256_mib_of_stdout_holds_about_one_copy() {
    // Iteration 1 prints 256 MiB of plain text (a raw result, §2.3); the
    // loop resets and iteration 2 reads loopx's peak RSS.
    let n = 256 * MIB;
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!(
            "if [ -e \"$LOOPX_PROJECT_ROOT/done\" ]; then\n\
               grep VmHWM /proc/$PPID/status > \"$LOOPX_PROJECT_ROOT/hwm\"\n\
               printf '{{\"stop\":true}}'\n\
             else\n\
               touch \"$LOOPX_PROJECT_ROOT/done\"\n\
               head -c {n} /dev/zero | tr '\\0' a\n\
             fi\n"
        ),
    );
    p.loopx(&["run", "w"]).stdout("").run();
    let hwm = kb(&p, "hwm") * 1024;
    assert!(
        hwm < (n as u64) * 3 / 2,
        "peak RSS {} MiB for a 256 MiB capture",
        hwm / MIB as u64
    );
}

/// `yes`-based bash that prints `unit` `n` times, for stdout of a known size.
fn repeated(unit: &str, n: usize) -> String {
    format!("yes {} | head -n {n} | tr -d '\\n'\n", sh_quote(unit))
}

#[test]
fn structured_stdout_of_any_shape_peaks_at_two_copies_plus_64_mib() {
    // §2.3 reads only top-level fields: a deep or wide stdout object is
    // scanned, not built as a tree (50 to 160 times its size), and a
    // non-string result is String()-ed from the text. Iteration 1 prints
    // about 12 MiB; iteration 2 gets the result on stdin (goto) and reads
    // loopx's peak RSS. `-v` also runs the notes' scan (report.rs).
    let levels = 2 * MIB; // 12 MiB of `{"a":` … `}`
    let deep_object = format!(
        "{}printf 1\n{}",
        repeated("{\"a\":", levels),
        repeated("}", levels)
    );
    // The result piped on: its length and first bytes; `None` for a raw
    // result, which restarts the loop.
    type Piped = Option<(usize, &'static str)>;
    // (case, stdout printer, result)
    let cases: Vec<(&str, String, Piped)> = vec![
        (
            "deep object beside the fields",
            format!(
                "printf '{{\"goto\":\"index\",\"result\":\"r\",\"x\":'\n{deep_object}printf '}}'\n"
            ),
            Some((1, "r")),
        ),
        (
            "deep object as the result",
            format!("printf '{{\"goto\":\"index\",\"result\":'\n{deep_object}printf '}}'\n"),
            Some((15, "[object Object]")),
        ),
        (
            "deep array as the result",
            format!(
                "printf '{{\"goto\":\"index\",\"result\":'\n{}{}printf '}}'\n",
                repeated("[", 6 * MIB),
                repeated("]", 6 * MIB)
            ),
            Some((0, "")),
        ),
        (
            "deep array of values as the result",
            format!(
                "printf '{{\"goto\":\"index\",\"result\":'\n{}printf 0\n{}printf '}}'\n",
                repeated("[1,", 3 * MIB),
                repeated("]", 3 * MIB)
            ),
            Some((6 * MIB + 1, "1,1,1,1,")),
        ),
        (
            "wide object",
            format!(
                "printf '{{\"goto\":\"index\",\"result\":\"r\",'\n{}printf '\"k\":0}}'\n",
                repeated("\"k\":0,", 2 * MIB)
            ),
            Some((1, "r")),
        ),
        (
            "wide array as the result",
            format!(
                "printf '{{\"goto\":\"index\",\"result\":['\n{}printf '0]}}'\n",
                repeated("[1,null,\"s\"],", MIB)
            ),
            Some((5 * MIB + 1, "1,,s,1,,s,")),
        ),
        (
            "deep object without a known field (a -v note)",
            format!("printf '{{\"Result\":1,\"x\":'\n{deep_object}printf '}}'\n"),
            None,
        ),
    ];
    for (case, printer, result) in cases {
        let p = Project::new();
        p.script(
            "w",
            "index.sh",
            &format!(
                "if [ -e \"$LOOPX_PROJECT_ROOT/done\" ]; then\n\
                   cat > \"$LOOPX_PROJECT_ROOT/stdin\"\n\
                   grep VmHWM /proc/$PPID/status > \"$LOOPX_PROJECT_ROOT/hwm\"\n\
                   printf '{{\"stop\":true}}'\n\
                 else\n\
                   touch \"$LOOPX_PROJECT_ROOT/done\"\n\
                   {{\n{printer}}} > \"$LOOPX_PROJECT_ROOT/out\"\n\
                   cat \"$LOOPX_PROJECT_ROOT/out\"\n\
                 fi\n"
            ),
        );
        let run = p.loopx(&["run", "-v", "w"]).stdout("");
        let run = match result {
            Some(_) => run.stderr_contains("→ goto index").stderr_lacks("note:"),
            None => run
                .stderr_contains("→ restart")
                .stderr_contains("'Result' is not a field of the output (did you mean 'result'?)"),
        };
        run.timeout(Duration::from_secs(180)).run();
        let piped = fs::read(p.path("stdin")).expect("stdin");
        let (len, head) = result.unwrap_or((0, ""));
        assert_eq!(piped.len(), len, "{case}: result length");
        assert!(
            piped.starts_with(head.as_bytes()),
            "{case}: result starts {head:?}"
        );
        let size = fs::metadata(p.path("out")).expect("stdout").len();
        assert!(size >= 12 * MIB as u64, "{case}: {size} bytes of stdout");
        let hwm = kb(&p, "hwm") * 1024;
        let budget = 2 * size + 64 * MIB as u64;
        eprintln!(
            "{case}: {:.1} MiB of stdout, peak RSS {:.1} MiB",
            size as f64 / MIB as f64,
            hwm as f64 / MIB as f64
        );
        assert!(
            hwm <= budget,
            "{case}: peak RSS {} MiB for {} MiB of stdout (budget {} MiB)",
            hwm / MIB as u64,
            size / MIB as u64,
            budget / MIB as u64
        );
    }
}

#[test]
fn piped_result_of_64_mib_reaches_the_next_script() {
    let n = 64 * MIB;
    let p = Project::new();
    p.script("w", "index.sh", &big_result_script(n, "b", ""))
        .script(
            "w",
            "b.sh",
            "cat > \"$LOOPX_PROJECT_ROOT/got\"\nprintf '{\"stop\":true}'\n",
        );
    p.loopx(&["run", "w"]).stdout("").run();
    let got = fs::read(p.path("got")).expect("got");
    assert_eq!(got.len(), n);
    assert!(got.iter().all(|&b| b == b'a'), "the result arrived intact");
}

#[test]
fn script_that_never_reads_a_64_mib_result_does_not_break_the_loop() {
    // b exits at once without reading stdin (loopx gets EPIPE and must not
    // die of SIGPIPE); c closes stdin first and goes on working. The loop
    // continues through both.
    let n = 64 * MIB;
    let p = Project::new();
    p.script("w", "index.sh", &big_result_script(n, "b", ""))
        .script(
            "w",
            "b.sh",
            &format!(
                "echo b >> \"$LOOPX_PROJECT_ROOT/log\"\n{}",
                big_result_script(n, "c", "")
            ),
        )
        .script(
            "w",
            "c.sh",
            "exec 0<&-\nsleep 0.2\necho c >> \"$LOOPX_PROJECT_ROOT/log\"\nprintf '{\"stop\":true}'\n",
        );
    p.loopx(&["run", "w"]).stdout("").run();
    assert_eq!(p.read("log"), "b\nc\n");
}

/// The process groups named by the `holder.<pgid>` files in the project.
fn holder_groups(p: &Project) -> Vec<i32> {
    fs::read_dir(p.root())
        .expect("read the project root")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("holder.")?.parse().ok()
        })
        .collect()
}

/// Kills the holders' groups when dropped: at the end of the run, and also
/// when a check of the run fails.
struct KillHolders<'a>(&'a Project);

impl Drop for KillHolders<'_> {
    fn drop(&mut self) {
        for pgid in holder_groups(self.0) {
            // SAFETY: a process group this test's scripts started; end it.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
}

#[test]
fn background_process_holding_stdout_does_not_hang_the_loop() {
    // The script leaves a process that holds its stdout for 30 s and writes
    // to it after the script exited. (Its stderr goes elsewhere only so the
    // test harness, which reads loopx's stderr to EOF, does not wait on it.)
    // loopx captures what was written before the script exited and moves on
    // (README, background-holder rule). Iterations 1 and 3 run index.sh, so
    // two holders are left; each names the script's process group, which
    // the test kills at the end (holder, its loop and its sleep alike).
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "printf '{\"goto\":\"b\",\"result\":\"before\"}'\n\
         ( trap '' HUP; : > \"$LOOPX_PROJECT_ROOT/holder.$$\"; \
           while [ ! -e \"$LOOPX_PROJECT_ROOT/b.done\" ]; do sleep 0.02; done; \
           echo late; sleep 30 ) 2>/dev/null &\n\
         until [ -e \"$LOOPX_PROJECT_ROOT/holder.$$\" ]; do sleep 0.01; done\n",
    )
    .script(
        "w",
        "b.sh",
        "cat > \"$LOOPX_PROJECT_ROOT/got\"\ntouch \"$LOOPX_PROJECT_ROOT/b.done\"\n",
    );
    let holders = KillHolders(&p);
    let started = Instant::now();
    p.loopx(&["run", "-n", "3", "w"]).stdout("").run();
    let took = started.elapsed();
    let groups = holder_groups(&p);
    drop(holders);
    assert_eq!(groups.len(), 2, "one holder per run of index.sh");
    assert!(
        took < Duration::from_secs(25),
        "loopx waited for the holder: {took:?}"
    );
    assert_eq!(p.read("got"), "before");
    for pgid in groups {
        wait_until("the holder's group to end", || {
            group_members(pgid).into_iter().all(|pid| !alive(pid))
        });
    }
}

#[test]
fn script_killing_itself_with_sigkill_exits_1_naming_the_signal() {
    let p = Project::new();
    p.script("w", "index.sh", "printf '{\"stop\":true}'\nkill -9 $$\n");
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("w:index")
        .stderr_contains("SIGKILL")
        .run();
}

#[test]
fn script_file_vanished_mid_loop_fails_at_spawn_with_a_clear_message() {
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "rm \"$LOOPX_PROJECT_ROOT/.loopx/w/b.sh\"\nprintf '{\"goto\":\"b\"}'\n",
    )
    .script("w", "b.sh", "echo b >> \"$LOOPX_PROJECT_ROOT/log\"\n");
    p.loopx(&["run", "w"])
        .status(1)
        .stdout("")
        .stderr_contains("cannot start script w:b")
        .stderr_contains("no longer exists")
        .run();
    assert!(!p.exists("log"));
}

/// Number of zombie children of `pid`, by /proc.
const ZOMBIES_OF_PPID: &str = r#"zombies() {
  local n=0 f s
  for f in /proc/[0-9]*/stat; do
    s=$(cat "$f" 2>/dev/null) || continue
    s=${s##*) }
    set -- $s
    [ "$1" = Z ] && [ "$2" = "$PPID" ] && n=$((n+1))
  done
  echo $n
}"#;

#[test]
fn ten_thousand_iterations_leak_no_fds_memory_or_zombies() {
    // The script counts iterations in a file; at 100 and at 10,000 it saves
    // loopx's open fds and RSS. bash builtins only on the hot path.
    let p = Project::new();
    p.file("count", "0\n");
    p.script(
        "w",
        "index.sh",
        "read -r n < \"$LOOPX_PROJECT_ROOT/count\"\n\
         n=$((n+1))\n\
         echo $n > \"$LOOPX_PROJECT_ROOT/count\"\n\
         if [ $n = 100 ] || [ $n = 10000 ]; then\n\
           ls /proc/$PPID/fd > \"$LOOPX_PROJECT_ROOT/fd.$n\"\n\
           grep VmRSS /proc/$PPID/status > \"$LOOPX_PROJECT_ROOT/rss.$n\"\n\
           cat /proc/$PPID/task/$PPID/children > \"$LOOPX_PROJECT_ROOT/children.$n\"\n\
         fi\n",
    );
    p.loopx(&["run", "-n", "10000", "w"])
        .timeout(Duration::from_secs(300))
        .stdout("")
        .run();
    assert_eq!(p.read("count").trim(), "10000");
    assert_eq!(p.read("fd.100"), p.read("fd.10000"), "open fds of loopx");
    let (early, late) = (kb(&p, "rss.100"), kb(&p, "rss.10000"));
    assert!(
        late <= early + 512,
        "RSS grew from {early} kB to {late} kB over 9,900 iterations"
    );
    // The only children are the running script itself and the run's
    // watcher (src/proc/watcher.rs).
    for n in [100, 10000] {
        let children: Vec<String> = p
            .read(&format!("children.{n}"))
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(children.len(), 2, "children of loopx at {n}: {children:?}");
    }
}

#[test]
fn orphans_left_by_scripts_are_reaped() {
    // Every iteration leaves a background process that outlives the script
    // and is re-parented to loopx. The last iteration waits until none of
    // them is left unreaped: zombies are reaped as they appear.
    let p = Project::new();
    p.file("count", "0\n");
    p.script(
        "w",
        "index.sh",
        &format!(
            "{ZOMBIES_OF_PPID}\n\
             read -r n < \"$LOOPX_PROJECT_ROOT/count\"\n\
             n=$((n+1))\n\
             echo $n > \"$LOOPX_PROJECT_ROOT/count\"\n\
             if [ $n -lt 200 ]; then sleep 0.01 & exit 0; fi\n\
             sleep 0.1\n\
             for i in $(seq 100); do\n\
               z=$(zombies); [ $z = 0 ] && break; sleep 0.02\n\
             done\n\
             echo $z > \"$LOOPX_PROJECT_ROOT/zombies\"\n"
        ),
    );
    p.loopx(&["run", "-n", "200", "w"])
        .timeout(Duration::from_secs(120))
        .run();
    assert_eq!(p.read("count").trim(), "200");
    assert_eq!(p.read("zombies").trim(), "0");
}

/// Runs `loopx <args>` through bash with the given stderr redirection.
fn run_with_stderr(p: &Project, redirect: &str, args: &str) -> Option<i32> {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("exec \"$0\" {args} {redirect}"))
        .arg(loopx_bin())
        .current_dir(p.root())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    isolate(&mut cmd, p.home());
    let status = cmd.status().expect("run loopx");
    status.code()
}

#[test]
fn closed_stderr_does_not_crash_loopx() {
    let p = Project::new();
    p.script("w", "index.sh", "exit 3\n")
        .script("w", "ok.sh", "printf '{\"stop\":true}'\n");
    // stderr closed outright.
    assert_eq!(run_with_stderr(&p, "2>&-", "run w"), Some(1));
    assert_eq!(run_with_stderr(&p, "2>&-", "run w:ok"), Some(0));
    assert_eq!(run_with_stderr(&p, "2>&-", "run w:missing"), Some(1));
    assert_eq!(run_with_stderr(&p, "2>&-", "run --bogus w"), Some(1));
}

#[test]
fn stderr_pipe_closed_by_its_reader_does_not_crash_loopx() {
    let p = Project::new();
    p.script("w", "index.sh", "exit 3\n")
        .script("w", "ok.sh", "printf '{\"stop\":true}'\n");
    for (target, code) in [("w", 1), ("w:ok", 0), ("w:missing", 1)] {
        let mut cmd = Command::new(loopx_bin());
        cmd.args(["run", target])
            .current_dir(p.root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        isolate(&mut cmd, p.home());
        let mut child = cmd.spawn().expect("spawn");
        // Close the read end before loopx writes anything.
        drop(child.stderr.take());
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(code), "{target}: {status:?}");
    }
}

#[test]
fn script_reading_the_terminal_gets_the_typed_line() {
    // The script holds the terminal from its first instruction: its process
    // group is the terminal's foreground group (/proc stat: pgrp == tpgid).
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "s=$(cat /proc/$$/stat); set -- ${s##*) }\n\
         [ \"$3\" = \"$6\" ] && echo foreground > \"$LOOPX_PROJECT_ROOT/fg\"\n\
         echo READY >&2\nread -r line </dev/tty\necho \"got:$line\" > \"$LOOPX_PROJECT_ROOT/got\"\nprintf '{\"stop\":true}'\n",
    );
    let out = run_on_pty(
        &p,
        &["run", "w"],
        &[("--wait", "READY"), ("--send", "hello tty\\n")],
    );
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert_eq!(p.read("got"), "got:hello tty\n");
    assert_eq!(p.read("fg"), "foreground\n");
}

#[test]
fn terminal_goes_back_to_loopx_between_scripts() {
    // Two scripts in a row read the terminal; each gets its own line, and
    // the loop ends normally.
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        "echo READY1 >&2\nread -r line </dev/tty\necho \"$line\" >> \"$LOOPX_PROJECT_ROOT/got\"\nprintf '{\"goto\":\"two\"}'\n",
    )
    .script(
        "w",
        "two.sh",
        "echo READY2 >&2\nread -r line </dev/tty\necho \"$line\" >> \"$LOOPX_PROJECT_ROOT/got\"\nprintf '{\"stop\":true}'\n",
    );
    let out = run_on_pty(
        &p,
        &["run", "w"],
        &[
            ("--wait", "READY1"),
            ("--send", "first\\n"),
            ("--wait", "READY2"),
            ("--send", "second\\n"),
        ],
    );
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert_eq!(p.read("got"), "first\nsecond\n");
}

#[test]
fn scripts_inherit_no_descriptors_of_loopx() {
    // A script sees the same descriptors as when bash runs it directly from
    // the test: not loopx's signal pipe, not the other ends of its own
    // pipes, not the terminal descriptor loopx keeps for the hand-over.
    let probe = "set -- /proc/$$/fd/*; echo \"${@##*/}\" >> \"$LOOPX_PROJECT_ROOT/fds\"\n";
    let p = Project::new();
    p.script(
        "w",
        "index.sh",
        &format!("{probe}printf '{{\"goto\":\"b\",\"result\":\"x\"}}'\n"),
    )
    .script("w", "b.sh", &format!("{probe}printf '{{\"stop\":true}}'\n"));
    let status = Command::new("bash")
        .arg(p.path(".loopx/w/b.sh"))
        .env("LOOPX_PROJECT_ROOT", p.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .status()
        .expect("bash");
    assert!(status.success());
    let baseline = p.read("fds");
    assert!(baseline.starts_with("0 1 "), "{baseline}");
    fs::remove_file(p.path("fds")).expect("rm fds");

    p.loopx(&["run", "w"]).run();
    assert_eq!(
        without_mark(&p.read("fds"), &baseline),
        format!("{baseline}{baseline}")
    );
    fs::remove_file(p.path("fds")).expect("rm fds");
    let out = run_on_pty(&p, &["run", "w"], &[]);
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert_eq!(
        without_mark(&p.read("fds"), &baseline),
        format!("{baseline}{baseline}")
    );
}

/// The probe's lines without the two descriptors loopx gives every script
/// on purpose, which `baseline` lacks: the run's mark (a pipe, by which the
/// watcher knows the run's processes; src/proc/watcher.rs) and a copy of
/// the checkpoint's lock (by which resume sees the run alive; resume.rs).
fn without_mark(fds: &str, baseline: &str) -> String {
    let base: Vec<&str> = baseline.split_whitespace().collect();
    let mut out = String::new();
    for line in fds.lines() {
        let (kept, extra): (Vec<&str>, Vec<&str>) =
            line.split_whitespace().partition(|fd| base.contains(fd));
        assert_eq!(
            extra.len(),
            2,
            "the mark and the lock, no other descriptor: {line}"
        );
        out.push_str(&kept.join(" "));
        out.push('\n');
    }
    out
}

#[test]
fn terminal_modes_are_restored_after_a_script_killed_in_raw_mode() {
    // A full-screen program killed while the terminal is raw leaves it raw;
    // loopx puts back the modes it started with before it exits.
    let p = Project::new();
    p.script("w", "index.sh", "stty raw -echo </dev/tty\nkill -9 $$\n");
    let argv: Vec<String> = vec![
        "/bin/bash".into(),
        "-c".into(),
        "\"$0\" run w; echo \"loopx=$?\" > loopx.status; stty -a </dev/tty > modes".into(),
        loopx_bin().to_string_lossy().into_owned(),
    ];
    let out = run_program_on_pty(&p, &argv, &[]);
    assert_eq!(out.exit, "0", "{}", out.transcript);
    assert_eq!(p.read("loopx.status"), "loopx=1\n");
    let modes = p.read("modes");
    let flags: Vec<&str> = modes.split([' ', ';', '\n']).collect();
    assert!(flags.contains(&"icanon"), "{modes}");
    assert!(flags.contains(&"echo"), "{modes}");
}
