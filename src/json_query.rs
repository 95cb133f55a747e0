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

use std::collections::hash_map::{Entry, HashMap};
use std::io::{self, BufRead, Write};
use std::ops::Range;

use crate::error::Error;
use crate::json;

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

/// The span of the value at `path` in the validated value at `at` of
/// `b`, if there is one. Read in place: nothing is built.
pub fn lookup(b: &[u8], at: Range<usize>, path: &Path) -> Option<Range<usize>> {
    let mut v = at;
    for seg in &path.0 {
        v = match b.get(v.start)? {
            b'{' => {
                // Duplicate keys: the last wins, as in JSON.parse.
                let mut found = None;
                each_member(b, v.start, |key, value| {
                    if key_is(b, key, seg) {
                        found = Some(value);
                    }
                });
                found?
            }
            b'[' => {
                let mut len = 0;
                each_item(b, v.start, |_| len += 1);
                let want = index(seg, len)?;
                let mut found = None;
                let mut i = 0;
                each_item(b, v.start, |item| {
                    if i == want {
                        found = Some(item);
                    }
                    i += 1;
                });
                found?
            }
            _ => return None,
        };
    }
    Some(v)
}

/// Whether the key literal `lit` (between its quotes) decodes to `seg`;
/// a literal too long to be it is not decoded.
fn key_is(b: &[u8], lit: Range<usize>, seg: &str) -> bool {
    // No character takes more than 12 bytes in a literal (`\ud83d\ude00`).
    if lit.len() > seg.len().saturating_mul(12) {
        return false;
    }
    if !b[lit.clone()].contains(&b'\\') {
        return &b[lit] == seg.as_bytes();
    }
    json::string_at(b, lit) == seg
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
pub fn render(b: &[u8], at: Range<usize>, out: &mut String) {
    if b.get(at.start) == Some(&b'"') {
        out.push_str(&json::string_at(b, at.start + 1..at.end - 1));
    } else {
        write_json(b, at, out);
    }
}

// The text below is always validated first (json::scan_top_level), so
// these walks need no error paths: brackets balance, strings close, and a
// scalar ends at the first byte that cannot continue it.

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string whose opening quote is at `i` (after its closing
/// quote).
fn string_end(b: &[u8], mut i: usize) -> usize {
    i += 1;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    i
}

/// The end of the value that starts at `i`.
fn value_end(b: &[u8], mut i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{' | b'[') => {
            // Only the count of open containers matters here, not their
            // kinds: no stack, however deep.
            let mut depth = 0u64;
            while let Some(&c) = b.get(i) {
                match c {
                    b'"' => {
                        i = string_end(b, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i
        }
        _ => {
            while matches!(b.get(i), Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
            {
                i += 1;
            }
            i
        }
    }
}

/// Calls `f(key literal, value span)` for each member of the object at
/// `open` (its `{`), in source order.
fn each_member(b: &[u8], open: usize, mut f: impl FnMut(Range<usize>, Range<usize>)) {
    let mut i = skip_ws(b, open + 1);
    while b.get(i) == Some(&b'"') {
        let key_end = string_end(b, i);
        let start = skip_ws(b, skip_ws(b, key_end) + 1);
        let end = value_end(b, start);
        f(i + 1..key_end - 1, start..end);
        i = skip_ws(b, end);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
}

/// Calls `f(value span)` for each item of the array at `open` (its `[`).
fn each_item(b: &[u8], open: usize, mut f: impl FnMut(Range<usize>)) {
    let mut i = skip_ws(b, open + 1);
    while !matches!(b.get(i), None | Some(b']')) {
        let end = value_end(b, i);
        f(i..end);
        i = skip_ws(b, end);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
}

/// The start offsets of the objects inside `at` that repeat a key, sorted.
///
/// One pass, one stack for every open object: an entry with the top bit
/// set for the object (its offset), then one per key so far (the key's
/// hash). At an object's `}` its keys are sorted and compared. So memory is
/// 8 bytes per open object and per key of the open objects, freed before
/// anything is written. A hash collision only sends an object down the
/// exact path in `write_json`, which compares the keys themselves.
fn objects_with_repeated_keys(b: &[u8], at: Range<usize>) -> Vec<usize> {
    const OBJECT: u64 = 1 << 63;
    let mut stack: Vec<u64> = Vec::new();
    let mut repeated = Vec::new();
    let mut i = at.start;
    while i < at.end {
        match b[i] {
            b'"' => {
                let end = string_end(b, i);
                // A key is a string after `{` or `,` inside an object whose
                // next byte past the whitespace is `:`.
                if b.get(skip_ws(b, end)) == Some(&b':') {
                    let key = json::string_at(b, i + 1..end - 1);
                    stack.push(hash(key.as_bytes()) & !OBJECT);
                }
                i = end;
                continue;
            }
            b'{' => stack.push(OBJECT | i as u64),
            b'}' => {
                let open = stack.iter().rposition(|e| e & OBJECT != 0).unwrap_or(0);
                let keys = &mut stack[open + 1..];
                keys.sort_unstable();
                if keys.windows(2).any(|w| w[0] == w[1]) {
                    repeated.push((stack[open] & !OBJECT) as usize);
                }
                stack.truncate(open);
            }
            _ => {}
        }
        i += 1;
    }
    repeated.sort_unstable();
    repeated
}

/// FNV-1a, 64 bits: for telling keys apart in `objects_with_repeated_keys`.
fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Compact JSON of the validated value at `at`, as
/// `JSON.stringify(JSON.parse(text))` writes it, from the text itself:
/// whitespace dropped, strings and numbers rewritten as JavaScript writes
/// them (a number out of range, `1e999`, is Infinity there and `null` in
/// JSON), and an object that repeats a key written with each key at its
/// first place holding its last value. Memory is the text, the output and
/// `objects_with_repeated_keys`'s stack; never a tree (95 times the text
/// for nested arrays).
pub fn write_json(b: &[u8], at: Range<usize>, out: &mut String) {
    enum Job {
        Span(Range<usize>),
        Text(&'static str),
        Key(Range<usize>, bool),
    }
    let repeated = objects_with_repeated_keys(b, at.clone());
    let mut jobs = vec![Job::Span(at)];
    while let Some(job) = jobs.pop() {
        let mut span = match job {
            Job::Text(t) => {
                out.push_str(t);
                continue;
            }
            Job::Key(lit, comma) => {
                if comma {
                    out.push(',');
                }
                json::write_json_string(out, &json::string_at(b, lit));
                out.push(':');
                continue;
            }
            Job::Span(span) => span,
        };
        while span.start < span.end {
            let i = span.start;
            match b[i] {
                b' ' | b'\t' | b'\n' | b'\r' => span.start += 1,
                b'"' => {
                    let end = string_end(b, i);
                    json::write_json_string(out, &json::string_at(b, i + 1..end - 1));
                    span.start = end;
                }
                b'{' if repeated.binary_search(&i).is_ok() => {
                    // The rest after this object, then its members.
                    let end = value_end(b, i);
                    jobs.push(Job::Span(end..span.end));
                    jobs.push(Job::Text("}"));
                    // JSON.parse keeps the place of the first and the
                    // value of the last.
                    let mut kept: Vec<(Range<usize>, Range<usize>)> = Vec::new();
                    let mut seen: HashMap<String, usize> = HashMap::new();
                    each_member(b, i, |key, value| {
                        match seen.entry(json::string_at(b, key.clone())) {
                            Entry::Occupied(at) => kept[*at.get()].1 = value,
                            Entry::Vacant(slot) => {
                                slot.insert(kept.len());
                                kept.push((key, value));
                            }
                        }
                    });
                    for (n, (key, value)) in kept.into_iter().enumerate().rev() {
                        jobs.push(Job::Span(value));
                        jobs.push(Job::Key(key, n > 0));
                    }
                    out.push('{');
                    break;
                }
                c @ (b'{' | b'}' | b'[' | b']' | b',' | b':') => {
                    out.push(c as char);
                    span.start += 1;
                }
                b't' | b'f' | b'n' => {
                    let end = value_end(b, i);
                    out.push_str(std::str::from_utf8(&b[i..end]).unwrap_or("null"));
                    span.start = end;
                }
                _ => {
                    let end = value_end(b, i);
                    let n = std::str::from_utf8(&b[i..end])
                        .ok()
                        .and_then(|t| t.parse::<f64>().ok())
                        .unwrap_or(f64::NAN);
                    out.push_str(&json::number_json(n));
                    span.start = end;
                }
            }
        }
    }
}

/// One output line's fields for the validated document `b`: tab-separated,
/// escaped when `escape` (see the module's doc), without the newline.
pub fn record(b: &[u8], paths: &[Path], escape: bool) -> String {
    let root = skip_ws(b, 0)..b.len();
    let root = root.start..value_end(b, root.start);
    let mut line = String::new();
    for (i, path) in paths.iter().enumerate() {
        if i > 0 {
            line.push('\t');
        }
        let Some(v) = lookup(b, root.clone(), path) else {
            continue;
        };
        if escape {
            let mut field = String::new();
            render(b, v, &mut field);
            escape_field(&field, &mut line);
        } else {
            render(b, v, &mut line);
        }
    }
    line
}

/// A field that shares its line with others: a backslash, newline,
/// carriage return and tab as `printf '%b'` reads them back, and every
/// other control character (a NUL from `\u0000`, an escape) as `\xHH`, so
/// a record is one line of text.
fn escape_field(field: &str, out: &mut String) {
    for c in field.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
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
        // Validated where it lies (json.rs: as Node decodes the bytes);
        // never built into a tree.
        if json::scan_top_level(&bytes, |_, _| {}).is_none() {
            return Err(Error::io(
                "loopx json",
                io::Error::new(io::ErrorKind::InvalidData, "stdin is not a JSON document"),
            ));
        }
        let mut line = record(&bytes, &query.paths, escape);
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
        // A blank line, or one that is not JSON, gives no record.
        if json::scan_top_level(&buf, |_, _| {}).is_none() {
            continue;
        }
        let mut line = record(&buf, &query.paths, escape);
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
        let doc = r#"{"a":{"b":[10,{"c":"x"},30]},"0":"zero","a2":[], "d":1,"d" : 2}"#;
        let at = |p: &str| {
            let b = doc.as_bytes();
            lookup(b, 0..b.len(), &parse_path(p).unwrap()).map(|v| {
                let mut s = String::new();
                render(b, v, &mut s);
                s
            })
        };
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
        assert_eq!(at(".d").as_deref(), Some("2"));
        assert_eq!(
            at(".").as_deref(),
            Some(r#"{"a":{"b":[10,{"c":"x"},30]},"0":"zero","a2":[],"d":2}"#)
        );
    }

    #[test]
    fn compact_json_is_what_json_stringify_writes() {
        for (input, want) in [
            (" [ 1 , 2.50 , -0 , 1E3 ] ", "[1,2.5,0,1000]"),
            (r#"[1e999,-1e999,1e21,5e-7]"#, "[null,null,1e+21,5e-7]"),
            (
                r#"{"\u0061":"\u00e9\/","b":[true,false,null]}"#,
                r#"{"a":"é/","b":[true,false,null]}"#,
            ),
            (
                r#"{"k":1,"j":{"x":1,"x":[{"y":1,"y":2}]},"k":3}"#,
                r#"{"k":3,"j":{"x":[{"y":2}]}}"#,
            ),
            (r#"{"a":"\u0061","\u0061":2}"#, r#"{"a":2}"#),
            (r#"[{"a":1},{"b":{}},{}]"#, r#"[{"a":1},{"b":{}},{}]"#),
        ] {
            let mut out = String::new();
            write_json(
                input.as_bytes(),
                skip_ws(input.as_bytes(), 0)..input.trim_end().len(),
                &mut out,
            );
            assert_eq!(out, want, "{input}");
        }
    }

    #[test]
    fn a_number_out_of_range_prints_as_null_not_infinity() {
        assert_eq!(out(&[".n"], r#"{"n":1e999}"#), "null\n");
        assert_eq!(out(&["."], "-1e999"), "null\n");
    }

    #[test]
    fn control_characters_sharing_a_line_are_escaped() {
        let input = "{\"a\":\"x\\u0000y\\u001b\",\"b\":1}\n";
        assert_eq!(out(&["--lines", ".a"], input), "x\\x00y\\x1b\n");
        assert_eq!(out(&[".a", ".b"], input), "x\\x00y\\x1b\t1\n");
    }

    #[test]
    fn memory_stays_near_the_size_of_the_input() {
        // 8 MB of nested arrays once took 760 MB as a tree; here the
        // scan keeps no stack for arrays and the output is the input.
        let depth = 4 << 20;
        let input = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(
            objects_with_repeated_keys(input.as_bytes(), 0..input.len()),
            Vec::<usize>::new()
        );
        assert_eq!(out(&["."], &input).len(), 2 * depth + 1);
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
