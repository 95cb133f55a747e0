//! `loopx json` (src/json_query.rs; docs/json.md): values out of JSON on
//! stdin, for bash workflows that have nothing but the loopx binary.

use crate::util::{Project, Run};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;

#[test]
fn json_prints_strings_raw_other_values_as_json_and_missing_ones_empty() {
    let p = Project::bare();
    let doc = r#"{"result":"line 1\nline 2","n":2,"message":{"content":[{"name":"Write"}]}}"#;
    p.loopx(&["json", ".result"])
        .stdin(doc.as_bytes())
        .stdout("line 1\nline 2\n")
        .run();
    p.loopx(&["json", ".message.content.0.name", ".n", ".nope", ".message"])
        .stdin(doc.as_bytes())
        .stdout("Write\t2\t\t{\"content\":[{\"name\":\"Write\"}]}\n")
        .run();
}

#[test]
fn json_lines_streams_one_record_per_event_as_it_comes() {
    let p = Project::bare();
    let mut child = std::process::Command::new(crate::util::loopx_bin())
        .args(["json", "--lines", ".type", ".text"])
        .current_dir(p.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loopx json");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    stdin
        .write_all(b"{\"type\":\"a\",\"text\":\"one\\ntwo\"}\n")
        .expect("write");
    stdin.flush().expect("flush");
    // The record comes out while stdin is still open: a reader sees each
    // event of an agent's stream as it happens.
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read");
    assert_eq!(line, "a\tone\\ntwo\n");
    stdin
        .write_all(b"not json\n{\"type\":\"b\"}\n")
        .expect("write");
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    assert_eq!(rest, "b\t\n");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn json_rejects_a_document_that_is_not_json_and_bad_paths() {
    let p = Project::bare();
    p.loopx(&["json", ".a"])
        .stdin(b"{\"a\":")
        .status(1)
        .stdout("")
        .stderr_contains("not a JSON document")
        .run();
    p.loopx(&["json"])
        .usage_error("at least one path", "loopx json --help")
        .run();
    p.loopx(&["json", "result"])
        .usage_error("'result'", "loopx json --help")
        .run();
    // jq's syntax is refused, not read as keys no document has (an empty
    // line, exit 0), and the message shows this syntax.
    p.loopx(&["json", ".a[0]"])
        .stdin(b"{\"a\":[1]}")
        .usage_error(
            "invalid path '.a[0]': '[' is jq's syntax; loopx json reads dot-separated keys \
             and array indexes (.items.0.name, .items.-1 for the last item): did you mean \
             '.a.0'?",
            "loopx json --help",
        )
        .run();
    p.loopx(&["json", ".a | .b"])
        .usage_error("'|' is jq's syntax", "loopx json --help")
        .run();
    p.loopx(&["json", "--raw", ".a"])
        .usage_error("'--raw'", "loopx json --help")
        .run();
    p.loopx(&["json", "-h"])
        .stdout_contains("Usage: loopx json [--lines] <path>...")
        .run();
    p.loopx(&["-h"])
        .stdout_contains("\nUsage:\n  loopx <command>")
        .stdout_contains("json [--lines] <path>...")
        .run();
}

#[test]
fn json_runs_a_megabyte_line() {
    let p = Project::bare();
    let big = "x".repeat(1 << 20);
    let input = format!("{{\"s\":\"{big}\"}}\n");
    let out = Run::command({
        let mut c = std::process::Command::new(crate::util::loopx_bin());
        c.args(["json", "--lines", ".s"]).current_dir(p.root());
        c
    })
    .stdin(input.as_bytes())
    .stdout(&format!("{big}\n"))
    .run();
    assert_eq!(out.stdout.len(), big.len() + 1);
}

/// `loopx json <args>` with at most `mib` MiB of address space.
fn json_capped(p: &Project, mib: u64, args: &[&str]) -> Run {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", mib * 1024))
        .arg(crate::util::loopx_bin())
        .arg("json")
        .args(args)
        .current_dir(p.root());
    crate::util::isolate(&mut cmd, p.home());
    Run::command(cmd)
}

#[test]
fn json_memory_stays_proportional_to_its_input() {
    // 8 MB of nested arrays took 760 MB as a tree; read in place, it takes
    // the input and the output.
    let p = Project::bare();
    let depth = 4 << 20;
    let doc = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let out = json_capped(&p, 128, &["."])
        .stdin(doc.as_bytes())
        .stdout_contains("[[[")
        .run();
    assert_eq!(out.stdout.len(), 2 * depth + 1);
    let doc = format!("{}1{}", "{\"a\":".repeat(1 << 20), "}".repeat(1 << 20));
    json_capped(&p, 128, &[".a.a.a"])
        .stdin(doc.as_bytes())
        .stdout_contains("{\"a\":{\"a\":")
        .run();
}

#[test]
fn json_writes_numbers_out_of_range_as_null_and_escapes_controls_on_shared_lines() {
    let p = Project::bare();
    p.loopx(&["json", ".n", ".m"])
        .stdin(br#"{"n":1e999,"m":[-1e999]}"#)
        .stdout("null\t[null]\n")
        .run();
    p.loopx(&["json", "--lines", ".a"])
        .stdin(b"{\"a\":\"x\\u0000y\\u001b[2J\"}\n")
        .stdout("x\\x00y\\x1b[2J\n")
        .run();
}
