//! `loopx json`: prints values out of JSON read on stdin, for bash workflows,
//! which need nothing but the loopx binary (no `jq`).
//!
//! ```text
//! loopx json [--lines] <path>...
//! ```
//!
//! A path is `.` (the whole value) or `.key.key...`; a segment of digits
//! (or `-` and digits, counted from the end) indexes an array, and on an
//! object it is a key like any other. Strings print raw, other values as
//! compact JSON, a missing value (or a path through a non-container) as an
//! empty field. Several paths print their fields on one line, separated by
//! tabs.
//!
//! Without `--lines`, stdin is one JSON document, and one path prints its
//! value exactly (a string with its newlines: a final message as the agent
//! wrote it). With `--lines`, each line of stdin is a document (JSONL, as
//! agent CLIs stream their events) and gives one output line as it is read;
//! a blank line or one that is not JSON gives none. Memory is bounded by the
//! longest line. Wherever a field shares a line with others (several paths,
//! or `--lines`), a backslash, newline, carriage return or tab in it is
//! written `\\`, `\n`, `\r`, `\t`, so that a record is always one line
//! (bash's `printf '%b'` turns them back).

use std::collections::HashMap;
use std::io::{self, BufRead, Write};

use crate::error::Error;
use crate::json::{self, Value};

/// One path: its segments, looked up in turn.
#[derive(Debug, PartialEq, Eq)]
pub struct Path(Vec<String>);

/// What `loopx json` was asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Query {
    pub lines: bool,
    pub paths: Vec<Path>,
}

/// `.` or `.a.b.0`: a leading dot, then segments separated by dots.
pub fn parse_path(text: &str) -> Result<Path, String> {
    let bad = |why: &str| format!("invalid path '{text}': {why}");
    let Some(rest) = text.strip_prefix('.') else {
        return Err(bad("a path starts with '.', e.g. .result"));
    };
    if rest.is_empty() {
        return Ok(Path(Vec::new()));
    }
    // jq's syntax (`.a[0]`, `.a | .b`, `.["k"]`, `.a?`) would otherwise read
    // as keys no document has and print an empty line, exit 0: refused,
    // with this syntax shown (and the path in it, when there is one).
    if let Some(c) = rest.chars().find(|c| JQ_SYNTAX.contains(*c)) {
        let mut why = format!(
            "'{c}' is jq's syntax; loopx json reads dot-separated keys and array indexes \
             (.items.0.name, .items.-1 for the last item)"
        );
        if let Some(meant) = from_jq(text) {
            why = format!("{why}: did you mean '{meant}'?");
        }
        return Err(bad(&why));
    }
    let segments: Vec<String> = rest.split('.').map(str::to_string).collect();
    if segments.iter().any(String::is_empty) {
        return Err(bad("empty segment"));
    }
    Ok(Path(segments))
}

/// Characters of jq's path syntax, rare in keys (a key with a space or a
/// `$` stays reachable).
const JQ_SYNTAX: &str = "[]|\"()?,";

/// A jq path of keys and indexes (`.a[0].b`, `.["k"]`, `.a?`) in this
/// syntax (`.a.0.b`), when it is one.
fn from_jq(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = text.strip_prefix('.')?;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']')?;
            let key = inner[..end].trim_matches('"');
            if key.is_empty() || key.contains(|c| JQ_SYNTAX.contains(c) || c == '.') {
                return None;
            }
            out.push('.');
            out.push_str(key);
            rest = &inner[end + 1..];
        } else if let Some(r) = rest.strip_prefix('?') {
            rest = r;
        } else if let Some(r) = rest.strip_prefix('.') {
            rest = r;
        } else {
            let end = rest.find(['.', '[', '?']).unwrap_or(rest.len());
            let key = &rest[..end];
            if key.contains(|c| JQ_SYNTAX.contains(c)) {
                return None;
            }
            out.push('.');
            out.push_str(key);
            rest = &rest[end..];
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The value at `path` in `value`, if there is one.
pub fn lookup<'a>(value: &'a Value, path: &Path) -> Option<&'a Value> {
    let mut v = value;
    for seg in &path.0 {
        v = match v {
            Value::Object(_) => v.get(seg)?,
            Value::Array(items) => items.get(index(seg, items.len())?)?,
            _ => return None,
        };
    }
    Some(v)
}

/// An array index: digits from the start, `-` and digits from the end.
fn index(seg: &str, len: usize) -> Option<usize> {
    let (neg, digits) = match seg.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, seg),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: usize = digits.parse().ok()?;
    if neg {
        len.checked_sub(n).filter(|_| n > 0)
    } else {
        Some(n)
    }
}

/// A value as a field: a string raw, anything else as compact JSON.
pub fn render(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => out.push_str(s),
        _ => write_json(value, out),
    }
}

/// Compact JSON, as `JSON.stringify` writes it. Iterative: input nesting
/// is unbounded (json.rs).
pub fn write_json(value: &Value, out: &mut String) {
    enum Work<'a> {
        Value(&'a Value),
        Text(&'static str),
        /// An object's key, after a comma unless it is the first.
        Key(&'a str, bool),
    }
    let mut stack = vec![Work::Value(value)];
    while let Some(work) = stack.pop() {
        let v = match work {
            Work::Text(t) => {
                out.push_str(t);
                continue;
            }
            Work::Key(k, comma) => {
                if comma {
                    out.push(',');
                }
                json::write_json_string(out, k);
                out.push(':');
                continue;
            }
            Work::Value(v) => v,
        };
        match v {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(&json::number_to_js_string(*n)),
            Value::String(s) => json::write_json_string(out, s),
            Value::Array(items) => {
                out.push('[');
                stack.push(Work::Text("]"));
                for (i, item) in items.iter().enumerate().rev() {
                    stack.push(Work::Value(item));
                    if i > 0 {
                        stack.push(Work::Text(","));
                    }
                }
            }
            Value::Object(members) => {
                // Duplicate keys: JSON.parse keeps the place of the first
                // and the value of the last.
                let mut kept: Vec<(&str, &Value)> = Vec::with_capacity(members.len());
                let mut seen: HashMap<&str, usize> = HashMap::new();
                for (k, v) in members {
                    match seen.get(k.as_str()) {
                        Some(&i) => kept[i].1 = v,
                        None => {
                            seen.insert(k, kept.len());
                            kept.push((k, v));
                        }
                    }
                }
                out.push('{');
                stack.push(Work::Text("}"));
                for (i, (k, v)) in kept.into_iter().enumerate().rev() {
                    stack.push(Work::Value(v));
                    stack.push(Work::Key(k, i > 0));
                }
            }
        }
    }
}

/// One output line's fields for `value`: tab-separated, escaped when
/// `escape` (see the module's doc), without the newline.
pub fn record(value: &Value, paths: &[Path], escape: bool) -> String {
    let mut line = String::new();
    for (i, path) in paths.iter().enumerate() {
        if i > 0 {
            line.push('\t');
        }
        let Some(v) = lookup(value, path) else {
            continue;
        };
        if escape {
            let mut field = String::new();
            render(v, &mut field);
            escape_field(&field, &mut line);
        } else {
            render(v, &mut line);
        }
    }
    line
}

fn escape_field(field: &str, out: &mut String) {
    for c in field.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
}

/// Reads `input` and writes the records to `output`.
pub fn run(query: &Query, mut input: impl BufRead, mut output: impl Write) -> Result<(), Error> {
    let escape = query.lines || query.paths.len() > 1;
    let write_err = |err: io::Error| {
        if err.kind() == io::ErrorKind::BrokenPipe {
            Error::StdoutClosed
        } else {
            Error::io("cannot write to stdout", err)
        }
    };
    if !query.lines {
        let mut bytes = Vec::new();
        input
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("cannot read stdin", e))?;
        let text = String::from_utf8_lossy(&bytes);
        let value = json::parse(&text).ok_or_else(|| {
            Error::io(
                "loopx json",
                io::Error::new(io::ErrorKind::InvalidData, "stdin is not a JSON document"),
            )
        })?;
        let mut line = record(&value, &query.paths, escape);
        line.push('\n');
        output
            .write_all(line.as_bytes())
            .and_then(|()| output.flush())
            .map_err(write_err)?;
        return Ok(());
    }
    // One line at a time, the buffer reused: memory is bounded by the
    // longest line.
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io("cannot read stdin", e))?;
        if n == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let Some(value) = json::parse(text) else {
            continue;
        };
        let mut line = record(&value, &query.paths, escape);
        line.push('\n');
        // Flushed per line: a reader sees each event as it happens.
        output
            .write_all(line.as_bytes())
            .and_then(|()| output.flush())
            .map_err(write_err)?;
    }
}

/// `loopx json` on the process's stdin and stdout.
pub fn run_stdio(query: &Query) -> Result<(), Error> {
    let stdin = io::stdin();
    let stdout = io::stdout();
    run(query, stdin.lock(), stdout.lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query as `loopx json <args>` asks for it (the command table parses
    /// the real arguments: cli/mod.rs).
    fn q(args: &[&str]) -> Query {
        Query {
            lines: args.contains(&"--lines"),
            paths: args
                .iter()
                .filter(|a| **a != "--lines")
                .map(|a| parse_path(a).expect("valid path"))
                .collect(),
        }
    }

    fn out(args: &[&str], input: &str) -> String {
        let mut o = Vec::new();
        run(&q(args), input.as_bytes(), &mut o).expect("run");
        String::from_utf8(o).expect("utf-8")
    }

    #[test]
    fn jq_syntax_is_refused_with_this_syntax_shown() {
        let err = |p: &str| parse_path(p).expect_err(p);
        let e = err(".a[0]");
        assert!(
            e.starts_with("invalid path '.a[0]': '[' is jq's syntax"),
            "{e}"
        );
        assert!(
            e.contains("(.items.0.name, .items.-1 for the last item)"),
            "{e}"
        );
        assert!(e.ends_with("did you mean '.a.0'?"), "{e}");
        assert!(err(".items[-1].text").ends_with("did you mean '.items.-1.text'?"));
        assert!(err(".[\"k\"]").ends_with("did you mean '.k'?"));
        assert!(err(".a?").ends_with("did you mean '.a'?"));
        // No path to suggest for a pipe or a whole-array iterator.
        assert!(!err(".a | .b").contains("did you mean"));
        assert!(!err(".a[]").contains("did you mean"));
    }

    #[test]
    fn paths_parse_into_segments() {
        assert_eq!(parse_path("."), Ok(Path(vec![])));
        assert_eq!(
            parse_path(".message.content.0.name"),
            Ok(Path(vec![
                "message".into(),
                "content".into(),
                "0".into(),
                "name".into()
            ]))
        );
        for bad in ["", "result", "..a", ".a.", ".a..b"] {
            assert!(parse_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lookup_walks_objects_and_arrays() {
        let v = json::parse(r#"{"a":{"b":[10,{"c":"x"},30]},"0":"zero","a2":[]}"#).unwrap();
        let at = |p: &str| lookup(&v, &parse_path(p).unwrap()).map(record_of);
        fn record_of(v: &Value) -> String {
            let mut s = String::new();
            render(v, &mut s);
            s
        }
        assert_eq!(at(".a.b.0").as_deref(), Some("10"));
        assert_eq!(at(".a.b.1.c").as_deref(), Some("x"));
        assert_eq!(at(".a.b.-1").as_deref(), Some("30"));
        assert_eq!(at(".a.b.-3").as_deref(), Some("10"));
        assert_eq!(at(".a.b.-4"), None);
        assert_eq!(at(".a.b.-0"), None);
        assert_eq!(at(".a.b.3"), None);
        assert_eq!(at(".a.b.x"), None);
        assert_eq!(at(".0").as_deref(), Some("zero"));
        assert_eq!(at(".a.b.1.c.d"), None);
        assert_eq!(at(".a2.0"), None);
        assert_eq!(
            at(".").as_deref(),
            Some(r#"{"a":{"b":[10,{"c":"x"},30]},"0":"zero","a2":[]}"#)
        );
    }

    #[test]
    fn values_render_as_json_and_strings_raw() {
        let input = r#"{"s":"a\"b\nc","n":1.5e3,"big":1e21,"t":true,"z":null,"o":{"k":[1,"x",{}],"j":0,"k":2},"e":[]}"#;
        assert_eq!(out(&[".s"], input), "a\"b\nc\n");
        assert_eq!(out(&[".n"], input), "1500\n");
        assert_eq!(out(&[".big"], input), "1e+21\n");
        assert_eq!(out(&[".t"], input), "true\n");
        assert_eq!(out(&[".z"], input), "null\n");
        // Duplicate keys: the last wins, as in JSON.parse.
        assert_eq!(out(&[".o"], input), "{\"k\":2,\"j\":0}\n");
        assert_eq!(out(&[".e"], input), "[]\n");
        assert_eq!(out(&[".missing"], input), "\n");
        assert_eq!(
            out(&["."], r#"{"a":[1,{"b":"\u0001"}],"c":"é"}"#),
            "{\"a\":[1,{\"b\":\"\\u0001\"}],\"c\":\"é\"}\n"
        );
    }

    #[test]
    fn several_paths_share_a_line_and_escape_their_separators() {
        let input = r#"{"a":"x\ty\\z","b":"1\n2\r","c":{"k":"v\\n"}}"#;
        assert_eq!(
            out(&[".a", ".nope", ".b"], input),
            "x\\ty\\\\z\t\t1\\n2\\r\n"
        );
        assert_eq!(
            out(&[".c", ".a"], input),
            "{\"k\":\"v\\\\\\\\n\"}\tx\\ty\\\\z\n"
        );
    }

    #[test]
    fn lines_give_one_record_per_json_line_and_skip_the_rest() {
        let input = "{\"type\":\"a\",\"m\":\"x\\ny\"}\n\nnot json\n  {\"type\":\"b\"}  \r\n[1]\n{\"type\":\"c\"}";
        assert_eq!(
            out(&["--lines", ".type", ".m"], input),
            "a\tx\\ny\nb\t\n\t\nc\t\n"
        );
        assert_eq!(out(&["--lines", ".type"], input), "a\nb\n\nc\n");
    }

    #[test]
    fn a_document_that_is_not_json_is_an_error() {
        let mut o = Vec::new();
        let err = run(&q(&[".a"]), "{".as_bytes(), &mut o).unwrap_err();
        assert!(err.to_string().contains("not a JSON document"), "{err}");
        assert!(o.is_empty());
    }

    #[test]
    fn deep_nesting_renders_without_recursion() {
        let depth = 200_000;
        let input = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let text = out(&[".a"], &input);
        assert_eq!(text.len(), 2 * depth + 1);
    }

    #[test]
    fn long_lines_stream() {
        let big = "x".repeat(1 << 20);
        let input = format!("{{\"s\":\"{big}\"}}\n{{\"s\":\"y\"}}\n");
        assert_eq!(out(&["--lines", ".s"], &input), format!("{big}\ny\n"));
    }
}
