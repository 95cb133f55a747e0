//! Structured output (§2.3): how a script's stdout becomes `result`, `goto`
//! and `stop`, and the JSON `loopx output` prints (§4.3, same shape as the
//! JS `output()` helper writes, §6.4).

use crate::json::{self, Kind, Raw};
use crate::wait::{self, RetryAfter};

/// One iteration's output (§2.3). Fields are reported as parsed; precedence
/// (`stop` beats `goto`, `result` only piped with `goto`) is the engine's job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    pub result: Option<String>,
    pub goto: Option<String>,
    pub stop: bool,
}

/// String results of at least this many bytes are decoded inside the stdout
/// buffer rather than copied (`json::take_string`); a shorter one is copied,
/// so that it does not keep a large buffer alive.
const IN_PLACE_LEN: usize = 64 * 1024;

/// The top-level fields loopx reads from an object on stdout, and whether
/// each one makes stdout structured output (§2.3's three do). Reading
/// another field is one more row here; its value is then found with
/// [`Fields::get`], whatever else the object holds.
/// `retry_after` and `cost_usd` are loopx's extensions (DESIGN.md "Beyond the
/// spec"): read from any top-level object, they never make stdout
/// structured nor change what §2.3 computes.
const FIELDS: [(&str, bool); 5] = [
    ("result", true),
    ("goto", true),
    ("stop", true),
    ("retry_after", false),
    ("cost_usd", false),
];

/// The longest name in [`FIELDS`]: a longer key is never even decoded.
const LONGEST: usize = 11;

/// The extension fields of a script's output, when it is a top-level JSON
/// object (whether or not it is structured output).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extensions {
    pub retry_after: Option<RetryAfter>,
    pub cost_usd: Option<f64>,
    /// `cost_usd` was a number past wait::MAX_DOLLARS or not finite: not
    /// counted.
    pub cost_ignored: bool,
    /// The first present field whose value is not valid.
    pub invalid: Option<InvalidField>,
}

/// An extension field with a value loopx cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidField {
    pub field: &'static str,
    /// The value's JSON text, cut short when long.
    pub value: String,
    pub why: String,
}

impl Extensions {
    /// Reads the extension fields' values out of `bytes`, where `fields`
    /// found them.
    fn read(fields: &Fields, bytes: &[u8]) -> Extensions {
        let mut ext = Extensions::default();
        let text = |v: &Raw| String::from_utf8_lossy(&bytes[v.span.clone()]).into_owned();
        let number = |v: &Raw| text(v).parse::<f64>().ok();
        let mut invalid = |field: &'static str, v: &Raw, why: String| {
            let shown: String = text(v).chars().take(80).collect();
            ext.invalid.get_or_insert(InvalidField {
                field,
                value: shown,
                why,
            });
        };
        let mut retry_after = None;
        if let Some(v) = fields.get("retry_after") {
            let read = match v.kind {
                Kind::Number => number(v)
                    .ok_or_else(String::new)
                    .and_then(wait::retry_after_seconds),
                Kind::String => wait::retry_after_time(&json::string_at(bytes, v.literal())),
                _ => {
                    Err("expected seconds (a number of at least 0) or an RFC 3339 time".to_string())
                }
            };
            match read {
                Ok(r) => retry_after = Some(r),
                Err(why) => invalid("retry_after", v, why),
            }
        }
        let mut cost_usd = None;
        if let Some(v) = fields.get("cost_usd") {
            let read = match v.kind {
                Kind::Number => number(v).ok_or_else(String::new).and_then(wait::cost_usd),
                _ => Err("expected US dollars (a number of at least 0)".to_string()),
            };
            match read {
                Ok(c) => cost_usd = Some(c),
                Err(why) => invalid("cost_usd", v, why),
            }
        }
        ext.retry_after = retry_after;
        ext.cost_ignored = cost_usd == Some(None);
        ext.cost_usd = cost_usd.flatten();
        ext
    }
}

/// The values of [`FIELDS`] in one object, as `JSON.parse` keeps them (the
/// last of duplicate keys), left in the text: validated, not built. Other
/// members cost nothing but the scan.
#[derive(Debug, Default)]
struct Fields([Option<Raw>; FIELDS.len()]);

impl Fields {
    /// The fields of `bytes` when it is a JSON object; `None` when it is
    /// another value or not JSON.
    fn scan(bytes: &[u8]) -> Option<Fields> {
        let mut fields = Fields::default();
        let object = json::scan_top_level(bytes, |key, value| {
            let Some(name) = json::short_string_at(bytes, key, LONGEST) else {
                return;
            };
            if let Some(i) = FIELDS.iter().position(|(n, _)| *n == name) {
                // A later duplicate replaces an earlier one, of any type.
                fields.0[i] = Some(value);
            }
        })?;
        object.then_some(fields)
    }

    fn get(&self, name: &str) -> Option<&Raw> {
        let i = FIELDS.iter().position(|(n, _)| *n == name)?;
        self.0.get(i)?.as_ref()
    }

    /// The first of §2.3's fields present, in [`FIELDS`] order.
    fn first_known(&self) -> Option<&'static str> {
        FIELDS
            .iter()
            .zip(&self.0)
            .find(|((_, known), value)| *known && value.is_some())
            .map(|((name, _), _)| *name)
    }
}

/// Interprets a script's captured stdout (§2.3).
///
/// The bytes are decoded as UTF-8 with invalid sequences replaced by U+FFFD,
/// as Node's decoder does. Only a top-level JSON object with at least one of
/// `result`, `goto`, `stop` is structured; anything else (including empty
/// stdout) is the raw text as `result`, byte for byte.
///
/// Takes the buffer by value: plain-text output (up to hundreds of MiB) is
/// returned as the result without a copy when it is valid UTF-8, and without
/// a JSON scan unless it starts with `{`.
#[cfg(test)]
pub fn parse(stdout: Vec<u8>) -> Output {
    parse_structured(stdout).0
}

/// `parse`, also telling whether the output was structured (a JSON object
/// with a known field) or taken as plain text.
///
/// Memory: the stdout buffer, plus the result when it is not a string
/// (`String(value)`, see `json::js_string_at`), plus one bit per nesting
/// level while scanning. No tree of the JSON is built.
#[cfg(test)]
pub fn parse_structured(stdout: Vec<u8>) -> (Output, bool) {
    let (out, structured, _) = parse_with_extensions(stdout);
    (out, structured)
}

/// `parse_structured`, and the extension fields, from the same scan.
pub fn parse_with_extensions(stdout: Vec<u8>) -> (Output, bool, Extensions) {
    // Only an object can be structured, and JSON.parse allows nothing but
    // JSON whitespace before it; checking the first other byte avoids a
    // scan on ordinary text.
    let first = stdout
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    let text = decode_utf8(stdout);
    if first != Some(b'{') {
        return (raw(text), false, Extensions::default());
    }
    let fields = match Fields::scan(text.as_bytes()) {
        Some(fields) => fields,
        // Not JSON (§2.3): all of it is the result.
        None => return (raw(text), false, Extensions::default()),
    };
    let ext = Extensions::read(&fields, text.as_bytes());
    if fields.first_known().is_none() {
        // An object with none of §2.3's keys is plain text too.
        return (raw(text), false, ext);
    }
    let bytes = text.as_bytes();
    // `goto` counts only as a string, `stop` only as exactly `true` (§2.3).
    let goto = fields
        .get("goto")
        .filter(|v| v.kind == Kind::String)
        .map(|v| json::string_at(bytes, v.literal()));
    let stop = fields
        .get("stop")
        .is_some_and(|v| v.kind == Kind::Bool(true));
    // `String(value)`. A string result may be most of a large stdout: a
    // large one is decoded inside the stdout buffer itself, not copied.
    let result = match fields.get("result") {
        None => None,
        Some(v) if v.kind == Kind::String && v.literal().len() >= IN_PLACE_LEN => {
            Some(json::take_string(text, v.literal()))
        }
        Some(v) => Some(json::js_string_at(bytes, v)),
    };
    (Output { result, goto, stop }, true, ext)
}

fn raw(text: String) -> Output {
    Output {
        result: Some(text),
        goto: None,
        stop: false,
    }
}

/// UTF-8 decoding as Node does it: zero-copy when the bytes are valid,
/// otherwise each maximal invalid subsequence becomes one U+FFFD.
fn decode_utf8(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    }
}

/// The JSON `loopx output` prints (§4.3): what JS `JSON.stringify({result,
/// goto, stop})` gives with undefined fields omitted, in that key order.
/// `stop` appears only when true, as `--stop` is the only way to set it.
pub fn to_json(out: &Output) -> String {
    let mut json = String::from("{");
    if let Some(result) = &out.result {
        json.push_str("\"result\":");
        json::write_json_string(&mut json, result);
    }
    if let Some(goto) = &out.goto {
        if json.len() > 1 {
            json.push(',');
        }
        json.push_str("\"goto\":");
        json::write_json_string(&mut json, goto);
    }
    if out.stop {
        if json.len() > 1 {
            json.push(',');
        }
        json.push_str("\"stop\":true");
    }
    json.push('}');
    json
}

/// `to_json`, with extension members (already JSON values) after §4.3's.
pub fn to_json_with(out: &Output, extensions: &[(&str, String)]) -> String {
    let mut json = to_json(out);
    json.pop();
    for (key, value) in extensions {
        if json.len() > 1 {
            json.push(',');
        }
        json::write_json_string(&mut json, key);
        json.push(':');
        json.push_str(value);
    }
    json.push('}');
    json
}

/// A failing script's own word on its failure, from a top-level JSON object
/// on its stdout (DESIGN.md "Beyond the spec": one general mechanism):
/// `"permanent": true` means `--retry` cannot help; `"class"` names the
/// kind of failure (`loopx agent` writes both).
#[derive(Debug, Default, PartialEq)]
pub struct FailureMark {
    pub permanent: bool,
    pub class: Option<String>,
}

/// The longest class name kept.
const CLASS_MAX: usize = 64;

/// Reads a [`FailureMark`] from a failing script's stdout; nothing for
/// anything but a JSON object. The last of duplicate keys wins.
pub fn failure_mark(stdout: &[u8]) -> FailureMark {
    let mut mark = FailureMark::default();
    let start = stdout
        .iter()
        .position(|b| !b" \t\r\n".contains(b))
        .unwrap_or(stdout.len());
    if stdout.get(start) != Some(&b'{') {
        return mark;
    }
    let mut found = FailureMark::default();
    let object = json::scan_top_level(stdout, |key, value| {
        match json::short_string_at(stdout, key, 9).as_deref() {
            Some("permanent") => found.permanent = value.kind == Kind::Bool(true),
            Some("class") if value.kind == Kind::String => {
                let name = json::string_at(stdout, value.literal());
                let ok = !name.is_empty()
                    && name.len() <= CLASS_MAX
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                found.class = ok.then_some(name);
            }
            _ => {}
        }
    });
    if object == Some(true) {
        mark = found;
    }
    mark
}

/// What a JSON value is, in words, for notes.
fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Null => "null",
        Kind::Bool(_) => "a boolean",
        Kind::Number => "a number",
        Kind::String => "a string",
        Kind::Array => "an array",
        Kind::Object => "an object",
    }
}

/// Outputs that are probably mistakes, which §2.3 otherwise makes silent
/// (notes point them out, report.rs; the loop still behaves as §2.3 says):
/// stdout that looks like JSON but is not, an object whose fields miss the
/// known ones narrowly, `stop` that is not exactly `true`, `goto` that is not
/// a string. Scans like `parse_structured`, building no tree.
pub fn suspicions(stdout: &[u8]) -> Vec<String> {
    let first = stdout
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if first.map(|i| stdout[i]) != Some(b'{') {
        return Vec::new();
    }
    // Starting with `{`, valid JSON is an object.
    let Some(fields) = Fields::scan(stdout) else {
        return vec![
            "stdout starts with '{' but is not valid JSON, so all of it is the result".into(),
        ];
    };
    let mut notes = Vec::new();
    if fields.first_known().is_none() {
        // Valid, so this second scan reports every member.
        json::scan_top_level(stdout, |key, value| {
            let near = json::short_string_at(stdout, key.clone(), LONGEST).and_then(|name| {
                let (field, _) = FIELDS
                    .iter()
                    .find(|(f, known)| *known && f.eq_ignore_ascii_case(&name))?;
                Some((name, field))
            });
            if let Some((name, field)) = near {
                notes.push(format!(
                    "'{name}' is not a field of the output (did you mean '{field}'?), so all of stdout is the result"
                ));
            } else if value.kind == Kind::Object {
                let inner = stdout.get(value.span).unwrap_or_default();
                if let Some(field) = Fields::scan(inner).and_then(|f| f.first_known()) {
                    let name = json::string_at(stdout, key);
                    notes.push(format!(
                        "'{field}' is nested inside '{name}', not at the top level, so all of stdout is the result"
                    ));
                }
            }
        });
        return notes;
    }
    match fields.get("stop") {
        None => {}
        Some(v) if v.kind == Kind::Bool(true) => {}
        // A string in quotes: "stop is true (a string), not true" read as a
        // contradiction.
        Some(other) => notes.push(format!(
            "stop is {} ({}); only the JSON value true stops the loop, so it goes on",
            quoted_if_string(
                json::js_string_at(stdout, other),
                other.kind == Kind::String
            ),
            kind(other.kind)
        )),
    }
    match fields.get("goto") {
        None => {}
        Some(v) if v.kind == Kind::String => {}
        Some(other) => notes.push(format!(
            "goto is {}, not a string, so it is ignored",
            kind(other.kind)
        )),
    }
    notes
}

/// A value for a note: as `String()` shows it, a string in quotes
/// (`"true"`), so it does not read as the value it resembles. (Control
/// characters are the note's printer's to escape: text::shown.)
fn quoted_if_string(text: String, is_string: bool) -> String {
    if is_string {
        format!("\"{text}\"")
    } else {
        text
    }
}

/// Every note on an output that is probably a mistake: text around a JSON
/// object, else what [`suspicions`] finds. (Text around an object that
/// starts stdout also makes it "not valid JSON"; the note that says where
/// the text is says more.)
pub fn notes(stdout: &[u8]) -> Vec<String> {
    match stray_text(stdout) {
        Some(note) => vec![note],
        None => suspicions(stdout),
    }
}

/// How many candidate objects [`stray_text`] looks at: each costs at most
/// one scan of the rest of stdout, which may be hundreds of MiB.
const STRAY_TRIES: usize = 8;

/// Text before or after a JSON object with one of §2.3's fields, the
/// commonest mistake: an `echo` beside `$LOOPX_BIN output`, or a log line
/// after it. §2.3 parses only a whole object, so all of stdout is then the
/// result. Candidates are objects that start stdout or a line (a
/// pretty-printed object's inner ones are indented), at most
/// [`STRAY_TRIES`] of them.
pub fn stray_text(stdout: &[u8]) -> Option<String> {
    let is_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let mut next = stdout
        .iter()
        .position(|b| !is_ws(b))
        .unwrap_or(stdout.len());
    for _ in 0..STRAY_TRIES {
        let start = if stdout.get(next) == Some(&b'{') {
            next
        } else {
            next + memfind(stdout.get(next..)?, b"\n{")? + 1
        };
        let Some(len) = json::value_len(&stdout[start..]) else {
            next = start + 1;
            continue;
        };
        let end = start + len;
        next = end;
        let known = Fields::scan(&stdout[start..end]).and_then(|f| f.first_known());
        if known.is_none() {
            continue;
        }
        let before = stdout[..start].iter().any(|b| !is_ws(b));
        let after = stdout[end..].iter().any(|b| !is_ws(b));
        let place = match (before, after) {
            (false, false) => return None,
            (true, false) => "before",
            (false, true) => "after",
            (true, true) => "before and after",
        };
        return Some(format!(
            "stdout has text {place} its JSON object; only a whole JSON object is parsed, \
             so all of stdout is the result (print other text to stderr)"
        ));
    }
    None
}

/// Where `needle` first occurs in `hay`.
fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(text: &str) -> (bool, Extensions) {
        let (_, structured, ext) = parse_with_extensions(text.as_bytes().to_vec());
        (structured, ext)
    }

    #[test]
    fn extension_fields_are_read_from_any_object_and_never_make_it_structured() {
        let (structured, e) = ext(r#"{"retry_after":5}"#);
        assert!(!structured);
        assert_eq!(e.retry_after, Some(RetryAfter::Seconds(5.0)));
        let (structured, e) =
            ext(r#"{"result":"r","retry_after":"1970-01-01T00:00:01Z","cost_usd":0.5}"#);
        assert!(structured);
        assert_eq!(e.retry_after, Some(RetryAfter::At(1000)));
        assert_eq!(e.cost_usd, Some(0.5));
        // Last duplicate wins, whatever came before.
        let (_, e) = ext(r#"{"cost_usd":"x","cost_usd":2,"retry_after":-1,"retry_after":0}"#);
        assert_eq!((e.cost_usd, e.invalid), (Some(2.0), None));
        assert_eq!(e.retry_after, Some(RetryAfter::Seconds(0.0)));
        for text in [
            "retry_after: 5",
            r#"[{"retry_after":5}]"#,
            r#"{"retry_after":5"#,
        ] {
            assert_eq!(ext(text).1, Extensions::default(), "{text}");
        }
    }

    #[test]
    fn an_invalid_extension_value_is_named_as_written() {
        let cases = [
            (r#"{"retry_after":-1}"#, "retry_after", "-1"),
            (r#"{"retry_after":"soon"}"#, "retry_after", r#""soon""#),
            (r#"{"retry_after":null}"#, "retry_after", "null"),
            (r#"{"retry_after":[1]}"#, "retry_after", "[1]"),
            (r#"{"stop":true,"cost_usd":-2e3}"#, "cost_usd", "-2e3"),
            (r#"{"cost_usd":"1"}"#, "cost_usd", r#""1""#),
        ];
        for (text, field, value) in cases {
            let bad = ext(text).1.invalid.expect(text);
            assert_eq!((bad.field, bad.value.as_str()), (field, value), "{text}");
        }
    }

    #[test]
    fn loopx_output_appends_extension_members() {
        let out = Output {
            result: Some("r".into()),
            ..Output::default()
        };
        let ext = [
            ("retry_after", "90".to_string()),
            ("cost_usd", "0.25".to_string()),
        ];
        assert_eq!(
            to_json_with(&out, &ext),
            r#"{"result":"r","retry_after":90,"cost_usd":0.25}"#
        );
        assert_eq!(
            to_json_with(&Output::default(), &ext[1..]),
            r#"{"cost_usd":0.25}"#
        );
    }
    #[test]
    fn failure_marks() {
        let m = |t: &str| failure_mark(t.as_bytes());
        assert_eq!(
            m(r#"{"permanent":true,"class":"auth"}"#),
            FailureMark {
                permanent: true,
                class: Some("auth".into())
            }
        );
        assert_eq!(
            m(r#" {"class":"hung"}"#),
            FailureMark {
                permanent: false,
                class: Some("hung".into())
            }
        );
        assert_eq!(
            m(r#"{"permanent":"yes","class":"a b"}"#),
            FailureMark::default()
        );
        assert_eq!(
            m(r#"{"permanent":true,"permanent":false}"#),
            FailureMark::default()
        );
        assert_eq!(m(r#"{"permanent":true} trailing"#), FailureMark::default());
        assert_eq!(m("permanent"), FailureMark::default());
    }

    use crate::json::Value;

    fn p(text: &str) -> Output {
        parse(text.as_bytes().to_vec())
    }

    fn out(result: Option<&str>, goto: Option<&str>, stop: bool) -> Output {
        Output {
            result: result.map(str::to_string),
            goto: goto.map(str::to_string),
            stop,
        }
    }

    fn raw_of(text: &str) -> Output {
        out(Some(text), None, false)
    }

    #[test]
    fn empty_stdout_is_empty_result() {
        assert_eq!(parse(Vec::new()), out(Some(""), None, false));
    }

    #[test]
    fn plain_text_is_the_raw_result_with_trailing_newline() {
        for text in ["hello\n", "hello", "  two\nlines\n\n", "\n", " ", "\t\r\n"] {
            assert_eq!(p(text), raw_of(text), "{text:?}");
        }
    }

    #[test]
    fn non_objects_fall_back_to_raw() {
        for text in [
            "[1,2]",
            "[{\"result\":\"x\"}]",
            "\"str\"",
            "42",
            "true",
            "false",
            "null",
            "\"{\\\"result\\\":1}\"\n",
        ] {
            assert_eq!(p(text), raw_of(text), "{text:?}");
        }
    }

    #[test]
    fn invalid_json_falls_back_to_raw() {
        for text in [
            "{",
            "{\"result\":\"x\",}",
            "{\"result\":\"x\"} trailing",
            "{result: 1}",
            "{\"result\":\"x\"}{\"result\":\"y\"}",
            "\u{feff}{\"result\":\"x\"}",
            "{\"result\":01}",
            "{\"result\":\"a\u{1}b\"}",
            "\u{b}{\"result\":1}",
        ] {
            assert_eq!(p(text), raw_of(text), "{text:?}");
        }
    }

    #[test]
    fn objects_without_known_keys_fall_back_to_raw() {
        for text in [
            "{}",
            "{\"Result\":\"x\"}",
            "{\"other\":1}\n",
            "{\"a\":{\"result\":1}}",
            "{\"__proto__\":{\"result\":1}}",
        ] {
            assert_eq!(p(text), raw_of(text), "{text:?}");
        }
    }

    #[test]
    fn structured_fields() {
        assert_eq!(p(r#"{"result":"done"}"#), out(Some("done"), None, false));
        assert_eq!(
            p(r#"{"result":"done","goto":"next"}"#),
            out(Some("done"), Some("next"), false)
        );
        assert_eq!(
            p(r#"{"goto":"wf:script"}"#),
            out(None, Some("wf:script"), false)
        );
        assert_eq!(p(r#"{"stop":true}"#), out(None, None, true));
        assert_eq!(
            p(r#"{"stop":true,"goto":"x","result":"r"}"#),
            out(Some("r"), Some("x"), true)
        );
        // Whitespace around the object, including a trailing newline.
        assert_eq!(
            p(" \n{\"result\" : \"a\"}\r\n"),
            out(Some("a"), None, false)
        );
        // Extra fields are ignored.
        assert_eq!(
            p(r#"{"x":1,"result":"a","y":[]}"#),
            out(Some("a"), None, false)
        );
        // Escapes are decoded in result and goto.
        assert_eq!(
            p(r#"{"result":"a\nb\u00e9","goto":"n\u0061me"}"#),
            out(Some("a\nbé"), Some("name"), false)
        );
    }

    #[test]
    fn result_is_coerced_with_js_string() {
        let cases = [
            (r#"{"result":null}"#, "null"),
            (r#"{"result":{}}"#, "[object Object]"),
            (r#"{"result":{"a":1}}"#, "[object Object]"),
            (r#"{"result":true}"#, "true"),
            (r#"{"result":false}"#, "false"),
            (r#"{"result":1.0}"#, "1"),
            (r#"{"result":-0}"#, "0"),
            (r#"{"result":1e21}"#, "1e+21"),
            (r#"{"result":12345678901234567890}"#, "12345678901234567000"),
            (r#"{"result":[1,[2,3]]}"#, "1,2,3"),
            (r#"{"result":[null]}"#, ""),
            (r#"{"result":[[]]}"#, ""),
            (r#"{"result":[{}]}"#, "[object Object]"),
            (r#"{"result":""}"#, ""),
        ];
        for (text, want) in cases {
            assert_eq!(p(text).result.as_deref(), Some(want), "{text}");
        }
    }

    #[test]
    fn duplicate_keys_last_wins() {
        assert_eq!(
            p(r#"{"result":"a","result":"b"}"#).result.as_deref(),
            Some("b")
        );
        assert_eq!(p(r#"{"goto":"a","goto":1}"#), out(None, None, false));
        assert_eq!(p(r#"{"goto":1,"goto":"a"}"#), out(None, Some("a"), false));
        assert_eq!(p(r#"{"stop":true,"stop":false}"#), out(None, None, false));
        assert_eq!(p(r#"{"stop":false,"stop":true}"#), out(None, None, true));
        // A later value replaces an earlier one of another type, both ways.
        assert_eq!(
            p(r#"{"result":"a","result":{"b":1}}"#).result.as_deref(),
            Some("[object Object]")
        );
        assert_eq!(
            p(r#"{"result":[1,[2]],"result":"s"}"#).result.as_deref(),
            Some("s")
        );
        // Keys are compared decoded.
        assert_eq!(
            p(r#"{"result":"a","\u0072esult":"b"}"#).result.as_deref(),
            Some("b")
        );
        let big = "z".repeat(IN_PLACE_LEN);
        let text = format!(r#"{{"result":"{big}","result":[null,{{}},"{big}"]}}"#);
        assert_eq!(p(&text).result, Some(format!(",[object Object],{big}")));
    }

    #[test]
    fn goto_only_when_a_string() {
        for g in ["1", "null", "true", "[\"a\"]", "{}"] {
            assert_eq!(
                p(&format!("{{\"goto\":{g}}}")),
                out(None, None, false),
                "{g}"
            );
        }
        assert_eq!(p(r#"{"goto":""}"#), out(None, Some(""), false));
    }

    #[test]
    fn stop_only_when_exactly_true() {
        for s in ["false", "\"true\"", "1", "null", "[true]", "{}"] {
            assert_eq!(
                p(&format!("{{\"stop\":{s}}}")),
                out(None, None, false),
                "{s}"
            );
        }
        // Still structured: the key is known, so the text is not the result.
        assert_eq!(
            p(r#"{"stop":false,"goto":"x"}"#),
            out(None, Some("x"), false)
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_like_node() {
        assert_eq!(parse(b"ab\xffcd".to_vec()), raw_of("ab\u{FFFD}cd"));
        // One U+FFFD per maximal invalid subpart: the encoded surrogate
        // ED A0 80 gives three; a truncated 4-byte sequence gives one.
        assert_eq!(
            parse(b"\xed\xa0\x80A\xf0\x9f\x98".to_vec()),
            raw_of("\u{FFFD}\u{FFFD}\u{FFFD}A\u{FFFD}")
        );
        assert_eq!(
            parse(b"{\"result\":\"a\xc3\"}".to_vec()),
            out(Some("a\u{FFFD}"), None, false)
        );
        assert_eq!(
            parse(b"{\"result\":\"a\"}\xff".to_vec()),
            raw_of("{\"result\":\"a\"}\u{FFFD}")
        );
    }

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        assert_eq!(
            p(r#"{"result":"\ud800x","goto":"\udc00"}"#),
            out(Some("\u{FFFD}x"), Some("\u{FFFD}"), false)
        );
    }

    #[test]
    fn plain_text_result_reuses_the_buffer() {
        let text = "x".repeat(1 << 20) + "\n";
        let bytes = text.clone().into_bytes();
        let ptr = bytes.as_ptr();
        let got = parse(bytes);
        let result = got.result.unwrap();
        assert_eq!(result, text);
        assert_eq!(
            result.as_ptr(),
            ptr,
            "valid UTF-8 plain text must not be copied"
        );
    }

    #[test]
    fn large_structured_result() {
        let body = "y".repeat(4 << 20);
        let got = parse(format!("{{\"result\":\"{body}\",\"goto\":\"n\"}}").into_bytes());
        assert_eq!(got.result.as_deref(), Some(body.as_str()));
        assert_eq!(got.goto.as_deref(), Some("n"));
    }

    #[test]
    fn large_structured_result_is_decoded_in_the_stdout_buffer() {
        let body = "y\\n\\u00e9".repeat(1 << 20);
        let expected = "y\né".repeat(1 << 20);
        let bytes = format!("{{\"goto\":\"n\",\"result\":\"{body}\"}}").into_bytes();
        let ptr = bytes.as_ptr();
        let got = parse(bytes);
        let result = got.result.unwrap();
        assert!(result == expected, "decoded result differs");
        assert_eq!(result.as_ptr(), ptr, "a large result must not be copied");
        assert_eq!(got.goto.as_deref(), Some("n"));
    }

    #[test]
    fn deep_nesting_does_not_crash() {
        let depth = 1_000_000;
        let deep = format!("{{\"result\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(p(&deep), out(Some(""), None, false));
        let unclosed = format!("{{\"result\":{}", "[".repeat(depth));
        assert_eq!(p(&unclosed), raw_of(&unclosed));
        let depth = 100_000;
        let deep_obj = format!("{}1{}", "{\"result\":".repeat(depth), "}".repeat(depth));
        assert_eq!(p(&deep_obj).result.as_deref(), Some("[object Object]"));
    }

    #[test]
    fn to_json_matches_stringify() {
        assert_eq!(
            to_json(&out(Some("done"), Some("next"), false)),
            r#"{"result":"done","goto":"next"}"#
        );
        assert_eq!(to_json(&out(None, None, true)), r#"{"stop":true}"#);
        assert_eq!(
            to_json(&out(Some("r"), Some("g"), true)),
            r#"{"result":"r","goto":"g","stop":true}"#
        );
        assert_eq!(
            to_json(&out(None, Some("wf:s"), true)),
            r#"{"goto":"wf:s","stop":true}"#
        );
        assert_eq!(to_json(&out(Some(""), None, false)), r#"{"result":""}"#);
        assert_eq!(to_json(&Output::default()), "{}");
        assert_eq!(
            to_json(&out(Some("a\"b\n\u{1}é"), None, false)),
            "{\"result\":\"a\\\"b\\n\\u0001é\"}"
        );
        // What loopx output prints reads back as the same structured output.
        for o in [
            out(Some("x\ny"), Some("a:b"), true),
            out(None, Some("g"), false),
            out(Some("{}"), None, false),
        ] {
            assert_eq!(p(&to_json(&o)), o);
        }
    }

    // ---- Differential test against the real JavaScript engine ----

    /// Node's side: §2.3 with JSON.parse and String(). Input is a JSON array
    /// of hex-encoded stdout bytes; output per case is
    /// `[resultHex|null, gotoHex|null, stop]`, or "throws" when String()
    /// throws (see `json::to_js_string`). Strings leave Node as UTF-8 bytes,
    /// so lone surrogates are compared as U+FFFD.
    const NODE_REFERENCE: &str = r#"
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const hex = (s) => Buffer.from(s, 'utf8').toString('hex');
const out = cases.map((h) => {
  const text = Buffer.from(h, 'hex').toString('utf8');
  const raw = [hex(text), null, false];
  if (text === '') return raw;
  let v;
  try { v = JSON.parse(text); } catch (e) { return raw; }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return raw;
  if (!('result' in v) && !('goto' in v) && !('stop' in v)) return raw;
  let result = null;
  if ('result' in v) {
    try { result = hex(String(v.result)); } catch (e) { return 'throws'; }
  }
  return [result, typeof v.goto === 'string' ? hex(v.goto) : null, v.stop === true];
});
process.stdout.write(JSON.stringify(out));
"#;

    /// splitmix64: small, deterministic, good enough to spread the corpus.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn chance(&mut self, percent: usize) -> bool {
            self.below(100) < percent
        }
        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }
    }

    /// Whitespace between tokens: JSON's four mostly, now and then a
    /// character JS counts as whitespace but JSON.parse does not.
    fn ws(rng: &mut Rng) -> &'static str {
        if rng.chance(4) {
            rng.pick(&["\u{b}", "\u{c}", "\u{a0}", "\u{feff}", "\u{2028}", "\u{85}"])
        } else {
            rng.pick(&["", "", "", " ", "\t", "\n", "\r\n", "  \n"])
        }
    }
    const KEYS: &[&str] = &[
        "result",
        "goto",
        "stop",
        "x",
        "",
        "Result",
        "\\u0072esult",
        "res\\u0075lt",
        "__proto__",
        "toString",
    ];

    fn random_number(rng: &mut Rng) -> String {
        match rng.below(5) {
            // A random finite double, printed shortest (Rust) or in full.
            0 | 1 => {
                let f = f64::from_bits(rng.next());
                let f = if f.is_finite() { f } else { 1.5 };
                if rng.chance(70) {
                    format!("{f:e}")
                } else {
                    format!("{f}")
                }
            }
            // A hand-rolled literal, sometimes malformed.
            _ => {
                let mut s = String::new();
                if rng.chance(30) {
                    s.push('-');
                }
                let int_len = rng.below(22);
                if int_len == 0 || rng.chance(20) {
                    s.push('0');
                } else {
                    s.push(char::from(b'1' + rng.below(9) as u8));
                }
                for _ in 1..int_len {
                    s.push(char::from(b'0' + rng.below(10) as u8));
                }
                if rng.chance(40) {
                    s.push('.');
                    for _ in 0..1 + rng.below(20) {
                        s.push(char::from(b'0' + rng.below(10) as u8));
                    }
                }
                if rng.chance(40) {
                    s.push(rng.pick(&['e', 'E']));
                    s.push_str(rng.pick(&["", "+", "-"]));
                    let exp =
                        rng.pick(&[0usize, 1, 5, 7, 20, 21, 22, 300, 308, 309, 324, 330, 400]);
                    s.push_str(&(exp + rng.below(3)).to_string());
                }
                if rng.chance(5) {
                    s.push_str(rng.pick(&[".", "e", "-", "0", "x", "."]));
                }
                s
            }
        }
    }

    fn random_string(rng: &mut Rng) -> String {
        const PIECES: &[&str] = &[
            "a",
            "Z",
            " ",
            "é",
            "😀",
            "\u{2028}",
            "\u{7f}",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\n",
            "\\r",
            "\\t",
            "\\u0041",
            "\\u00e9",
            "\\u00E9",
            "\\u0000",
            "\\u001f",
            "\\ud83d\\ude00",
            "\\uD83D\\uDE00",
            "\\ud800",
            "\\udfff",
            "\\ud83d\\ud83d",
            "\\ude00\\ud83d",
            "\\u2028",
            "\\uffff",
            "\\ufeff",
            "\\x",
            "\\u12",
            "\\u",
            "\u{1}",
            "\t",
            "\n",
            "[1]",
            "{}",
            ":",
            ",",
        ];
        let mut s = String::from("\"");
        for _ in 0..rng.below(6) {
            // Mostly valid pieces; the invalid ones appear now and then.
            let piece = rng.pick(PIECES);
            let invalid = matches!(piece, "\\x" | "\\u12" | "\\u" | "\u{1}" | "\t" | "\n");
            if !invalid || rng.chance(15) {
                s.push_str(piece);
            }
        }
        if !rng.chance(3) {
            s.push('"');
        }
        s
    }

    fn random_value(rng: &mut Rng, depth: usize) -> String {
        let kind = if depth > 4 {
            rng.below(5)
        } else {
            rng.below(8)
        };
        match kind {
            0 => rng
                .pick(&["null", "true", "false", "nul", "True"])
                .to_string(),
            1 | 2 => random_number(rng),
            3 | 4 => random_string(rng),
            5 | 6 => {
                let mut s = String::from("[");
                for i in 0..rng.below(4) {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(ws(rng));
                    s.push_str(&random_value(rng, depth + 1));
                }
                if rng.chance(5) {
                    s.push(',');
                }
                s.push(']');
                s
            }
            _ => random_object(rng, depth + 1),
        }
    }

    fn random_object(rng: &mut Rng, depth: usize) -> String {
        let mut s = String::from("{");
        for i in 0..rng.below(5) {
            if i > 0 {
                s.push(',');
            }
            s.push_str(ws(rng));
            s.push('"');
            s.push_str(rng.pick(KEYS));
            s.push('"');
            s.push_str(ws(rng));
            s.push(':');
            s.push_str(ws(rng));
            // Known keys get plausible values more often.
            let v = match rng.below(6) {
                0 => format!("\"{}\"", rng.pick(&["next", "wf:s", "", "a\\nb"])),
                1 => "true".to_string(),
                _ => random_value(rng, depth),
            };
            s.push_str(&v);
        }
        if rng.chance(4) {
            s.push(',');
        }
        s.push('}');
        s
    }

    /// Breaks a valid document now and then: byte edits, truncation, junk.
    fn mutate(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
        match rng.below(6) {
            0 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes.remove(i);
            }
            1 if !bytes.is_empty() => {
                let i = rng.below(bytes.len());
                bytes[i] = rng.pick(b"{}[],:\"\\ \n0-e.tx\x00\x1f\xff\xc3\x80");
            }
            2 => {
                let i = rng.below(bytes.len() + 1);
                bytes.truncate(i);
            }
            3 => bytes.extend_from_slice(rng.pick(&[
                &b"x"[..],
                b"{}",
                b"\n\n",
                b"\xe2\x80\xa8",
                b"\xef\xbb\xbf",
                b"\xf0\x9f",
            ])),
            _ => {
                let i = rng.below(bytes.len() + 1);
                let junk = rng.pick(&[
                    &b"\xff"[..],
                    b"\xed\xa0\x80",
                    b"\xc0\xaf",
                    b"\xf4\x90\x80\x80",
                    b"\xe2\x82",
                    b"//",
                    b",",
                    b"\x00",
                ]);
                bytes.splice(i..i, junk.iter().copied());
            }
        }
        bytes
    }

    fn corpus() -> Vec<Vec<u8>> {
        let mut cases: Vec<Vec<u8>> = [
            "",
            " ",
            "\n",
            "hello\n",
            "{}",
            "[]",
            "null",
            "\"s\"",
            "1",
            "{\"result\":\"a\"}\n",
            "{\"result\":null}",
            "{\"result\":{}}",
            "{\"result\":[1,[2,3]]}",
            "{\"result\":[null]}",
            "{\"result\":[[]]}",
            "{\"result\":[{}]}",
            "{\"result\":1e21}",
            "{\"result\":1e-7}",
            "{\"result\":1e-6}",
            "{\"result\":123e-20}",
            "{\"result\":12345678901234567890}",
            "{\"result\":-0}",
            "{\"result\":1e400}",
            "{\"result\":-1e400}",
            "{\"result\":5e-324}",
            "{\"result\":2.5e-324}",
            "{\"result\":1.7976931348623157e308}",
            "{\"result\":0.1}",
            "{\"stop\":false}",
            "{\"stop\":\"true\"}",
            "{\"stop\":1}",
            "{\"goto\":1}",
            "{\"goto\":null}",
            "{\"result\":\"a\",\"result\":\"b\"}",
            "{\"stop\":true,\"stop\":false}",
            "{\"\\u0072esult\":\"esc key\"}",
            "{\"__proto__\":{\"result\":1}}",
            "{\"result\":{\"toString\":1}}",
            "{\"result\":[{\"toString\":1}]}",
            "{\"result\":{\"valueOf\":1}}",
            "\u{feff}{\"result\":1}",
            "{\"result\":\"\\ud800\"}",
            "{\"result\":\"\\ud83d\\ude00\"}",
            "{\"result\":\"\\udc00\\ud800\"}",
            "{\"goto\":\"\\ud800\"}",
            "{\"result\":\"\u{2028}\"}",
            "{\"result\":1,}",
            "{\"result\":01}",
            "{\"result\":1.}",
            "{\"result\":.5}",
            "{\"result\":-}",
            "{\"result\":\"\t\"}",
            "{\"result\":\"a\"} x",
            "{\"result\":\"a\"}\n\n",
            " \t\r\n{\"goto\":\"g\"} \t\r\n",
            "\u{b}{\"result\":1}",
            "{\"result\":1}\u{a0}",
            "{\"result\":\"\\/\"}",
            "{\"result\":true,\"goto\":\"x\",\"stop\":true}",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        cases.push(b"\xed\xa0\x80A\xf0\x9f\x98".to_vec());
        cases.push(b"{\"result\":\"\xff\xfe\"}".to_vec());
        cases.push(b"{\"result\":\"\xc0\xaf\xe0\x80\xbf\xf8\x88\x80\x80\x80\"}".to_vec());
        cases.push(b"\xef\xbb\xbf{\"result\":1}".to_vec());
        // Deep nesting: JS parses these; String() of a deep array throws.
        let depth = 200_000;
        cases.push(
            format!("{{\"result\":{}{}}}", "[".repeat(depth), "]".repeat(depth)).into_bytes(),
        );
        cases.push(format!("{{\"result\":{}", "[".repeat(depth)).into_bytes());
        cases.push(
            format!(
                "{{\"result\":\"ok\",\"x\":{}1{}}}",
                "{\"a\":".repeat(depth),
                "}".repeat(depth)
            )
            .into_bytes(),
        );
        cases.push(format!("{{\"result\":{}1{}}}", "[".repeat(500), "]".repeat(500)).into_bytes());
        // Strings past DEFER_LEN, decoded inside the stdout buffer.
        let big = r#"ab\"\\\/\n\u00e9\ud83d\ude00\ud800 \udc00é€😀"#.repeat(2000);
        for doc in [
            format!(r#"{{"result":"{big}","goto":"x"}}"#),
            format!(r#"{{"result":"{big}","result":"small"}}"#),
            format!(r#"{{"result":"small","result":"{big}"}}"#),
            format!(r#"{{"goto":"{big}","result":"{big}"}}"#),
            format!(r#"{{"stop":true,"other":"{big}"}}"#),
            format!(r#"{{"other":"{big}"}}"#),
            format!(r#"{{"result":["{big}"]}}"#),
            format!(r#"{{"result":"{big}\x"}}"#),
            format!(r#"{{"result":"{big}"}} x"#),
        ] {
            cases.push(doc.into_bytes());
        }

        let mut rng = Rng(0x5EED_1234_ABCD_0042);
        for i in 0..2500 {
            let doc = match i % 5 {
                // Structured-looking documents.
                0..=2 => format!(
                    "{}{}{}",
                    ws(&mut rng),
                    random_object(&mut rng, 0),
                    ws(&mut rng)
                ),
                // A result holding several numbers at once.
                3 => {
                    let nums: Vec<String> = (0..1 + rng.below(8))
                        .map(|_| random_number(&mut rng))
                        .collect();
                    format!("{{\"result\":[{}]}}", nums.join(","))
                }
                // Token soup.
                _ => {
                    const TOKENS: &[&str] = &[
                        "{",
                        "}",
                        "[",
                        "]",
                        ",",
                        ":",
                        "\"result\"",
                        "\"goto\"",
                        "\"stop\"",
                        "\"x\"",
                        "true",
                        "false",
                        "null",
                        "1",
                        "-0",
                        "2e3",
                        " ",
                        "\n",
                        "\"\\u0041\"",
                        "hi",
                    ];
                    let mut s = String::from(if rng.chance(80) { "{" } else { "" });
                    for _ in 0..rng.below(12) {
                        s.push_str(rng.pick(TOKENS));
                    }
                    s
                }
            };
            let mut bytes = doc.into_bytes();
            if rng.chance(25) {
                bytes = mutate(&mut rng, bytes);
            }
            cases.push(bytes);
        }
        cases
    }

    fn to_hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn from_hex(hex: &str) -> String {
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex from node"))
            .collect();
        String::from_utf8(bytes).expect("node writes UTF-8")
    }

    fn hex_field(v: &Value) -> Option<String> {
        match v {
            Value::String(h) => Some(from_hex(h)),
            _ => None,
        }
    }

    #[test]
    fn differential_against_node() {
        let cases = corpus();
        let mut input = String::from("[");
        for (i, c) in cases.iter().enumerate() {
            if i > 0 {
                input.push(',');
            }
            input.push('"');
            input.push_str(&to_hex(c));
            input.push('"');
        }
        input.push(']');

        let Some(reply) = json::tests::node_eval(NODE_REFERENCE, input) else {
            return;
        };

        let expected = json::parse(&reply).expect("node output is JSON");
        let Value::Array(expected) = &expected else {
            panic!("node output is not an array")
        };
        assert_eq!(expected.len(), cases.len());

        let mut structured = 0;
        let mut throws = 0;
        for (case, want) in cases.iter().zip(expected) {
            let got = parse(case.clone());
            let shown = String::from_utf8_lossy(&case[..case.len().min(200)]).into_owned();
            let Value::Array(fields) = want else {
                // JS String() threw (own `toString` key, or an array too deep
                // for V8's stack); we still produce a string without crashing.
                assert_eq!(want, &Value::String("throws".into()), "{shown:?}");
                assert!(got.result.is_some(), "{shown:?}");
                throws += 1;
                continue;
            };
            let want = Output {
                result: fields.first().and_then(hex_field),
                goto: fields.get(1).and_then(hex_field),
                stop: matches!(fields.get(2), Some(Value::Bool(true))),
            };
            if want.result.as_deref() != Some(String::from_utf8_lossy(case).as_ref()) {
                structured += 1;
            }
            assert_eq!(got, want, "input {shown:?}");
        }
        eprintln!(
            "differential: {} cases, {structured} structured, {throws} where JS String() throws",
            cases.len()
        );
        // The corpus must actually exercise both paths.
        assert!(structured > 300, "only {structured} structured cases");
        assert!((3..100).contains(&throws), "{throws} throwing cases");
    }

    #[test]
    fn text_around_a_json_object_is_pointed_out() {
        let note = |s: &str| stray_text(s.as_bytes());
        let said = |s: &str| note(s).unwrap_or_else(|| panic!("no note for {s:?}"));
        assert!(said("working...\n{\"stop\":true}\n").contains("text before its JSON object"));
        assert!(said("{\"goto\":\"b\"}\ndone\n").contains("text after its JSON object"));
        assert!(said("a\n{\"result\":\"x\"}\nb").contains("before and after"));
        assert!(said("a\n{\n  \"result\": [\n    {\"x\": 1}\n  ]\n}\n").contains("before its"));
        assert_eq!(
            said("log\n{\"stop\":true}"),
            "stdout has text before its JSON object; only a whole JSON object is parsed, \
             so all of stdout is the result (print other text to stderr)"
        );
        // A whole object, plain text, objects without §2.3's fields and
        // broken JSON: nothing to say here.
        for quiet in [
            "",
            "plain text\n",
            " \n{\"stop\":true}\n\n",
            "log\n{\"level\":\"info\"}\n",
            "log\n{\"stop\":tru\n",
            "x{\"stop\":true}",
        ] {
            assert_eq!(note(quiet), None, "{quiet:?}");
        }
        // An object without the fields before the one with them.
        assert!(note("{\"a\":1}\n{\"stop\":true}\n").is_some());
        // notes(): the placed note replaces "not valid JSON".
        assert_eq!(notes(b"{\"stop\":true} ok").len(), 1);
        assert!(notes(b"{\"stop\":true} ok")[0].contains("text after"));
        assert!(notes(b"{oops")[0].contains("not valid JSON"));
    }

    #[test]
    fn suspicious_outputs_are_pointed_out() {
        let notes = |s: &str| suspicions(s.as_bytes());
        assert!(notes("plain text").is_empty());
        assert!(notes(r#"{"result":"x","goto":"next"}"#).is_empty());
        assert!(notes(r#"{"other":1}"#).is_empty());
        assert!(notes("{oops")[0].contains("not valid JSON"));
        assert!(notes(r#"{"Goto":"next"}"#)[0].contains("did you mean 'goto'"));
        assert!(notes(r#"{"data":{"result":"x"}}"#)[0].contains("'result' is nested inside 'data'"));
        assert_eq!(
            notes(r#"{"stop":"true"}"#),
            [
                r#"stop is "true" (a string); only the JSON value true stops the loop, so it goes on"#
            ]
        );
        assert!(notes(r#"{"stop":1}"#)[0].contains("a number"));
        assert!(notes(r#"{"stop":false}"#)[0].contains("a boolean"));
        assert!(notes(r#"{"goto":["a"]}"#)[0].contains("goto is an array"));
        assert_eq!(
            notes(r#"{"stop":[1,[2,{}]],"goto":{}}"#),
            [
                "stop is 1,2,[object Object] (an array); only the JSON value true stops the loop, so it goes on",
                "goto is an object, not a string, so it is ignored",
            ]
        );
        // Deep values are scanned, not built; only top-level members are
        // looked into, one level down.
        let depth = 1_000_000;
        let deep = format!(
            r#"{{"data":{{"x":{}{},"stop":1}},"Stop":{}1{},"more":{{"a":{{"goto":1}}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth),
            "{\"a\":".repeat(depth),
            "}".repeat(depth),
        );
        assert_eq!(notes(&deep), [
            "'stop' is nested inside 'data', not at the top level, so all of stdout is the result",
            "'Stop' is not a field of the output (did you mean 'stop'?), so all of stdout is the result",
        ]);
        assert!(notes(&deep[..deep.len() - 1])[0].contains("not valid JSON"));
    }
}

/// Property tests: any stdout is interpreted without a panic, and
/// structured output follows §2.3 field by field (that what `loopx output`
/// prints reads back is cli/commands.rs's property).
#[cfg(test)]
mod props {
    use super::*;
    use crate::json::Value;
    use crate::testing::{self, config, Json};
    use proptest::prelude::*;

    /// §2.3 applied to a generated stdout: the model says which fields hold
    /// what, the raw text is the fallback.
    fn expected(stdout: &[u8], m: &Json) -> Output {
        let known = ["result", "goto", "stop"];
        if !matches!(m, Json::Obj(_)) || known.iter().all(|k| m.member(k).is_none()) {
            return raw(String::from_utf8_lossy(stdout).into_owned());
        }
        Output {
            result: m.member("result").map(Json::js_string),
            goto: match m.member("goto") {
                Some(Json::Str(s)) => Some(s.value()),
                _ => None,
            },
            stop: matches!(m.member("stop"), Some(Json::Bool(true))),
        }
    }

    /// Objects with §2.3's keys (and others), any values; sometimes not an
    /// object at all.
    fn stdout_model() -> impl Strategy<Value = Json> {
        prop_oneof![
            4 => prop::collection::vec((testing::key(true), testing::json(true)), 0..6)
                .prop_map(Json::Obj),
            1 => testing::json(true),
        ]
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn any_stdout_is_interpreted_without_panicking(
            bytes in prop::collection::vec(any::<u8>(), 0..256),
            brace in any::<bool>(),
        ) {
            let mut stdout = if brace { b"{".to_vec() } else { Vec::new() };
            stdout.extend_from_slice(&bytes);
            let out = parse(stdout.clone());
            if stdout.iter().find(|b| !b" \t\n\r".contains(b)) != Some(&b'{') {
                // Not an object: the whole text is the result (§2.3).
                prop_assert_eq!(out, raw(String::from_utf8_lossy(&stdout).into_owned()));
            }
        }

        #[test]
        fn structured_output_follows_section_2_3(
            m in stdout_model(),
            ws in prop::collection::vec(0usize..8, 0..6),
        ) {
            let mut stdout = Vec::new();
            m.write(&mut stdout, &ws);
            prop_assert_eq!(parse(stdout.clone()), expected(&stdout, &m), "{:?}",
                String::from_utf8_lossy(&stdout));
        }
    }

    /// How this module read stdout before it scanned instead: the whole
    /// tree from `JSON.parse`, then `String()` of it. The oracle for the scan.
    fn by_tree(stdout: &[u8]) -> Output {
        let text = String::from_utf8_lossy(stdout).into_owned();
        let value = json::parse(&text).filter(|v| matches!(v, Value::Object(_)));
        let Some(v) = value.filter(|v| FIELDS.iter().any(|(k, _)| v.get(k).is_some())) else {
            return raw(text);
        };
        Output {
            result: v.get("result").map(json::to_js_string),
            goto: match v.get("goto") {
                Some(Value::String(g)) => Some(g.clone()),
                _ => None,
            },
            stop: matches!(v.get("stop"), Some(Value::Bool(true))),
        }
    }

    /// `suspicions` as it was on the tree, also an oracle.
    fn suspicions_by_tree(stdout: &[u8]) -> Vec<String> {
        let first = stdout
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        if first.map(|i| stdout[i]) != Some(b'{') {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(stdout);
        let Some(value) = json::parse(&text) else {
            return vec![
                "stdout starts with '{' but is not valid JSON, so all of it is the result".into(),
            ];
        };
        let Value::Object(members) = &value else {
            return Vec::new();
        };
        let known = ["result", "goto", "stop"];
        let kind = |v: &Value| match v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        };
        let mut notes = Vec::new();
        if known.iter().all(|f| value.get(f).is_none()) {
            for (key, inner) in members {
                if let Some(field) = known.iter().find(|f| f.eq_ignore_ascii_case(key)) {
                    notes.push(format!(
                        "'{key}' is not a field of the output (did you mean '{field}'?), so all of stdout is the result"
                    ));
                } else if let Some(field) = known.iter().find(|f| inner.get(f).is_some()) {
                    notes.push(format!(
                        "'{field}' is nested inside '{key}', not at the top level, so all of stdout is the result"
                    ));
                }
            }
            return notes;
        }
        match value.get("stop") {
            None | Some(Value::Bool(true)) => {}
            Some(other) => notes.push(format!(
                "stop is {} ({}); only the JSON value true stops the loop, so it goes on",
                quoted_if_string(json::to_js_string(other), matches!(other, Value::String(_))),
                kind(other)
            )),
        }
        match value.get("goto") {
            None | Some(Value::String(_)) => {}
            Some(other) => notes.push(format!(
                "goto is {}, not a string, so it is ignored",
                kind(other)
            )),
        }
        notes
    }

    /// A stdout: generated, sometimes damaged (cut short, a byte dropped,
    /// a byte inserted), or with a deep value spliced in.
    fn stdout_bytes() -> impl Strategy<Value = Vec<u8>> {
        let edit = prop_oneof![
            Just(None),
            (any::<prop::sample::Index>(), 0u8..4, any::<u8>()).prop_map(Some),
        ];
        (stdout_model(), prop::collection::vec(0usize..8, 0..6), edit).prop_map(|(m, ws, edit)| {
            let mut stdout = Vec::new();
            m.write(&mut stdout, &ws);
            if let Some((at, how, byte)) = edit {
                let i = at.index(stdout.len() + 1);
                match how {
                    0 => stdout.truncate(i),
                    1 if i < stdout.len() => {
                        stdout.remove(i);
                    }
                    2 => stdout.insert(i, byte),
                    _ => stdout.insert(i, b"{}[],:\"0n"[usize::from(byte) % 9]),
                }
            }
            stdout
        })
    }

    proptest! {
        #![proptest_config(config(2048))]

        #[test]
        fn the_scan_reads_stdout_as_the_tree_did(stdout in stdout_bytes()) {
            prop_assert_eq!(parse(stdout.clone()), by_tree(&stdout), "{:?}",
                String::from_utf8_lossy(&stdout));
            prop_assert_eq!(suspicions(&stdout), suspicions_by_tree(&stdout));
        }
    }

    proptest! {
        #![proptest_config(config(32))]

        #[test]
        fn deep_values_beside_the_known_fields_change_nothing(
            depth in 1usize..100_000,
            goto in "[a-z:]{1,12}",
        ) {
            let stdout = format!(
                "{{\"goto\":\"{goto}\",\"x\":{}0{},\"result\":{}0{}}}",
                "[".repeat(depth), "]".repeat(depth), "{\"a\":".repeat(depth), "}".repeat(depth),
            );
            let out = parse(stdout.into_bytes());
            prop_assert_eq!(out.goto, Some(goto));
            prop_assert_eq!(out.result.as_deref(), Some("[object Object]"));
        }
    }
}
