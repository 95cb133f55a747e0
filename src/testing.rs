//! Shared pieces of the property tests (proptest) that every parser of
//! untrusted input has beside its unit tests: scripts' stdout (output.rs,
//! json.rs), env files (envfile.rs, env.rs), targets, npm ranges and archive
//! paths.
//!
//! Each property runs a fixed number of cases chosen to keep `cargo test`
//! quick; `PROPTEST_CASES=<n>` runs every one of them `n` times instead
//! (README "Development").

use proptest::prelude::*;
use proptest::test_runner::Config;

/// `cases` cases, unless `PROPTEST_CASES` asks for another number.
pub fn config(cases: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config
}

// ---------------------------------------------------------------- JSON text

/// Number literals and what JavaScript's `String(JSON.parse(literal))` gives
/// (checked with Node): beyond-double magnitudes, underflow, negative zero,
/// more digits than a double holds, exponent forms.
pub const NUMBERS: &[(&str, &str)] = &[
    ("1e400", "Infinity"),
    ("-1e400", "-Infinity"),
    ("2e308", "Infinity"),
    ("1e-400", "0"),
    ("0e999999999", "0"),
    ("-0", "0"),
    ("-0.0", "0"),
    ("-0e-0", "0"),
    ("123456789012345678901234567890", "1.2345678901234568e+29"),
    ("18446744073709551616", "18446744073709552000"),
    ("9007199254740993", "9007199254740992"),
    (
        "99999999999999999999999999999999999999999999999999e-40",
        "10000000000",
    ),
    ("1.7976931348623157e308", "1.7976931348623157e+308"),
    ("1e308", "1e+308"),
    ("5e-324", "5e-324"),
    ("1E21", "1e+21"),
    ("100000000000000000000", "100000000000000000000"),
    ("0.1", "0.1"),
    ("0.30000000000000004", "0.30000000000000004"),
    ("0.000001", "0.000001"),
    ("1e-7", "1e-7"),
    ("123e-20", "1.23e-18"),
    ("2.5e+3", "2500"),
    ("-1.5E-10", "-1.5e-10"),
    ("1.0", "1"),
    ("10E0", "10"),
];

/// A JSON string literal as a sequence of pieces, so a test knows both the
/// bytes it writes and the string JavaScript reads from them.
#[derive(Debug, Clone)]
pub enum Piece {
    /// A character, written as itself (escaped where JSON requires it).
    Char(char),
    /// A character written as `\uXXXX` escapes (a pair beyond the BMP).
    Escaped(char),
    /// A lone surrogate escape, e.g. `\uD800`: JS keeps it, and it becomes
    /// U+FFFD once the string is UTF-8 (§2.3, json.rs).
    Lone(u16),
    /// Bytes that are not UTF-8, written raw: the decoder turns them into
    /// U+FFFD before JSON is parsed. Only in stdout, never in a `&str`.
    Raw(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct Str(pub Vec<Piece>);

impl Str {
    pub fn plain(s: &str) -> Str {
        Str(s.chars().map(Piece::Char).collect())
    }

    /// The literal, quotes included.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(b'"');
        for piece in &self.0 {
            match piece {
                Piece::Char('"') => out.extend_from_slice(b"\\\""),
                Piece::Char('\\') => out.extend_from_slice(b"\\\\"),
                Piece::Char(c) if (*c as u32) < 0x20 => {
                    out.extend_from_slice(format!("\\u{:04x}", *c as u32).as_bytes())
                }
                Piece::Char(c) => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                Piece::Escaped(c) => {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        out.extend_from_slice(format!("\\u{unit:04X}").as_bytes());
                    }
                }
                Piece::Lone(unit) => out.extend_from_slice(format!("\\u{unit:04x}").as_bytes()),
                Piece::Raw(bytes) => out.extend_from_slice(bytes),
            }
        }
        out.push(b'"');
    }

    /// The string JavaScript holds after decoding stdout as UTF-8 and
    /// `JSON.parse`, as UTF-8 (lone surrogates as U+FFFD). Built from
    /// UTF-16 code units, as JS strings are, so an escaped high surrogate
    /// followed by an escaped low one pairs up as it does there.
    pub fn value(&self) -> String {
        let mut units: Vec<u16> = Vec::new();
        let mut bytes: Vec<u8> = Vec::new();
        let flush = |bytes: &mut Vec<u8>, units: &mut Vec<u16>| {
            units.extend(String::from_utf8_lossy(bytes).encode_utf16());
            bytes.clear();
        };
        for piece in &self.0 {
            match piece {
                Piece::Char(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                Piece::Raw(raw) => bytes.extend_from_slice(raw),
                Piece::Escaped(c) => {
                    flush(&mut bytes, &mut units);
                    units.extend_from_slice(c.encode_utf16(&mut [0; 2]));
                }
                Piece::Lone(unit) => {
                    flush(&mut bytes, &mut units);
                    units.push(*unit);
                }
            }
        }
        flush(&mut bytes, &mut units);
        String::from_utf16_lossy(&units)
    }
}

/// A JSON value as a test generates it.
#[derive(Debug, Clone)]
pub enum Json {
    Null,
    Bool(bool),
    /// A literal from [`NUMBERS`] or a safe integer: (text, JS `String()`).
    Num(String, String),
    Str(Str),
    Arr(Vec<Json>),
    Obj(Vec<(Str, Json)>),
}

/// Whitespace JSON allows between tokens.
const WS: &[&str] = &["", " ", "\n", "\t", "\r\n", "  "];

impl Json {
    /// The JSON text, with whitespace picked by `ws` (indices into the
    /// allowed whitespace, reused cyclically).
    pub fn write(&self, out: &mut Vec<u8>, ws: &[usize]) {
        let mut n = 0;
        let mut space = |out: &mut Vec<u8>| {
            if !ws.is_empty() {
                out.extend_from_slice(WS[ws[n % ws.len()] % WS.len()].as_bytes());
                n += 1;
            }
        };
        self.write_with(out, &mut space);
    }

    fn write_with(&self, out: &mut Vec<u8>, space: &mut dyn FnMut(&mut Vec<u8>)) {
        space(out);
        match self {
            Json::Null => out.extend_from_slice(b"null"),
            Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Json::Num(text, _) => out.extend_from_slice(text.as_bytes()),
            Json::Str(s) => s.write(out),
            Json::Arr(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write_with(out, space);
                }
                space(out);
                out.push(b']');
            }
            Json::Obj(members) => {
                out.push(b'{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    space(out);
                    key.write(out);
                    space(out);
                    out.push(b':');
                    value.write_with(out, space);
                }
                space(out);
                out.push(b'}');
            }
        }
        space(out);
    }

    /// JavaScript's `String(value)`.
    pub fn js_string(&self) -> String {
        match self {
            Json::Null => "null".into(),
            Json::Bool(b) => b.to_string(),
            Json::Num(_, js) => js.clone(),
            Json::Str(s) => s.value(),
            Json::Obj(_) => "[object Object]".into(),
            // join(","): null elements are empty, nested arrays join too.
            Json::Arr(items) => items
                .iter()
                .map(|item| match item {
                    Json::Null => String::new(),
                    other => other.js_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The member `key` as `JSON.parse` keeps it: the last occurrence.
    pub fn member(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members
                .iter()
                .rev()
                .find(|(k, _)| k.value() == key)
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Characters that stress a JSON reader: quotes, backslashes, controls,
/// multi-byte and astral characters, U+FFFD itself.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => prop::sample::select(vec![
            '"', '\\', '/', '\0', '\n', '\r', '\t', '\u{1f}', '\u{7f}', 'é', '\u{2028}',
            '\u{fffd}', '\u{feff}', '😀', '\u{10ffff}', 'a', '{', '}', ':', ',',
        ]),
    ]
}

/// Bytes that are not UTF-8: stray continuation bytes, truncated sequences,
/// overlong forms, encoded surrogates, values past U+10FFFF.
fn invalid_utf8() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(vec![
        vec![0x80],
        vec![0xbf, 0x80],
        vec![0xc0, 0x80],
        vec![0xc3],
        vec![0xe2, 0x82],
        vec![0xed, 0xa0, 0x80],
        vec![0xf0, 0x9f, 0x98],
        vec![0xf4, 0x90, 0x80, 0x80],
        vec![0xf8, 0x88, 0x80, 0x80, 0x80],
        vec![0xfe],
        vec![0xff, 0xff],
    ])
}

/// A string literal; `raw` allows bytes that are not UTF-8.
pub fn string(raw: bool) -> BoxedStrategy<Str> {
    let piece = prop_oneof![
        6 => tricky_char().prop_map(Piece::Char),
        2 => tricky_char().prop_map(Piece::Escaped),
        1 => (0xd800u16..0xe000).prop_map(Piece::Lone),
    ];
    let piece = if raw {
        prop_oneof![8 => piece, 1 => invalid_utf8().prop_map(Piece::Raw)].boxed()
    } else {
        piece.boxed()
    };
    prop::collection::vec(piece, 0..12).prop_map(Str).boxed()
}

/// A number literal with its JS `String()`.
pub fn number() -> impl Strategy<Value = Json> {
    const SAFE: i64 = (1 << 53) - 1;
    prop_oneof![
        prop::sample::select(NUMBERS).prop_map(|(t, js)| Json::Num(t.into(), js.into())),
        (-SAFE..=SAFE).prop_map(|i| Json::Num(i.to_string(), i.to_string())),
    ]
}

/// Any JSON value, a few levels deep; `raw` as in [`string`].
pub fn json(raw: bool) -> BoxedStrategy<Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        string(raw).prop_map(Json::Str),
    ];
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Arr),
            prop::collection::vec((key(raw), inner), 0..6).prop_map(Json::Obj),
        ]
    })
    .boxed()
}

/// Object keys: mostly the ones §2.3 knows (sometimes escaped, so a parser
/// must compare decoded keys), else anything.
pub fn key(raw: bool) -> BoxedStrategy<Str> {
    let known = prop::sample::select(vec!["result", "goto", "stop", "resul", "Result", ""]);
    prop_oneof![
        3 => known.prop_map(Str::plain),
        1 => (prop::sample::select(vec!["result", "goto", "stop"]), any::<prop::sample::Index>())
            .prop_map(|(k, at)| {
                // One character of the key written as an escape.
                let i = at.index(k.len());
                Str(k.chars().enumerate().map(|(j, c)| {
                    if j == i { Piece::Escaped(c) } else { Piece::Char(c) }
                }).collect())
            }),
        1 => string(raw),
    ]
    .boxed()
}
