//! A JSON reader and writer with JavaScript semantics.
//!
//! loopx must interpret a script's stdout exactly as the original TypeScript
//! implementation did with `JSON.parse` and `String(value)` (§2.3), and print
//! what `JSON.stringify` would (§4.3 `loopx output`, §6.4). So this module
//! accepts exactly the grammar `JSON.parse` accepts, converts numbers the way
//! JS does, and renders values the way `String()` does.
//!
//! A script's stdout is scanned ([`scan_top_level`]), not built into a
//! [`Value`] tree: only its top-level fields matter (§2.3), and a tree of deep
//! or wide input is tens of times the size of its text.
//!
//! Every walk over a value is iterative (explicit stacks, including `Drop`),
//! because V8 accepts arbitrarily deep nesting and a script's stdout is
//! untrusted input: a recursive walk would overflow the stack.

/// A parsed JSON value. Object members keep their source order and any
/// duplicate keys; [`Value::get`] resolves duplicates the way `JSON.parse`
/// does (the last one wins).
///
/// The derived `Debug` and `PartialEq` recurse: they are meant for tests and
/// shallow values, not for arbitrarily deep input. Dropping is iterative.
#[derive(Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object; for duplicate keys the last occurrence,
    /// as `JSON.parse` keeps the last. `None` for a missing key or a non-object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl Drop for Value {
    // The default drop glue recurses once per nesting level; a million nested
    // `[` from a script would overflow the stack. Detach children onto a heap
    // stack instead, so each value is dropped with no children left.
    fn drop(&mut self) {
        let mut pending: Vec<Value> = match self {
            Value::Array(items) if !items.is_empty() => std::mem::take(items),
            Value::Object(members) if !members.is_empty() => std::mem::take(members)
                .into_iter()
                .map(|(_, v)| v)
                .collect(),
            _ => return,
        };
        while let Some(mut value) = pending.pop() {
            match &mut value {
                Value::Array(items) => pending.append(items),
                Value::Object(members) => {
                    pending.extend(std::mem::take(members).into_iter().map(|(_, v)| v))
                }
                _ => {}
            }
        }
    }
}

/// Parses `text` exactly as `JSON.parse` would: `Some` for every input it
/// accepts, `None` for every input it throws on.
///
/// Strings are UTF-8 here, JS strings UTF-16: a lone surrogate from a `\uD800`
/// style escape becomes U+FFFD, which is what Node writes when such a string
/// is encoded as UTF-8 (e.g. piped to the next script, §2.3); a valid escaped
/// pair becomes the real character.
///
/// This builds the whole tree, tens of times the size of the text for deep
/// or wide input: it is for small files loopx reads (package.json, status
/// files). A script's stdout goes through [`scan_top_level`] instead.
pub fn parse(text: &str) -> Option<Value> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        pos: 0,
    };
    let mut stack: Vec<Frame> = Vec::new();
    'value: loop {
        p.skip_ws();
        let mut done = match p.peek()? {
            b'{' => {
                p.pos += 1;
                p.skip_ws();
                if p.eat(b'}') {
                    Value::Object(Vec::new())
                } else {
                    let key = p.key()?;
                    stack.push(Frame::Object(Vec::new(), key));
                    continue 'value;
                }
            }
            b'[' => {
                p.pos += 1;
                p.skip_ws();
                if p.eat(b']') {
                    Value::Array(Vec::new())
                } else {
                    stack.push(Frame::Array(Vec::new()));
                    continue 'value;
                }
            }
            b'"' => {
                let mut s = String::new();
                p.string_into(&mut s)?;
                Value::String(s)
            }
            b't' => p.literal(b"true", Value::Bool(true))?,
            b'f' => p.literal(b"false", Value::Bool(false))?,
            b'n' => p.literal(b"null", Value::Null)?,
            b'-' | b'0'..=b'9' => Value::Number(p.number()?),
            _ => return None,
        };
        // `done` is a complete value: attach it to the open container, closing
        // as many containers as the input closes here.
        loop {
            p.skip_ws();
            match stack.last_mut() {
                None => {
                    // Trailing garbage after the top-level value is an error.
                    return (p.pos == p.bytes.len()).then_some(done);
                }
                Some(Frame::Array(items)) => {
                    items.push(done);
                    match p.next()? {
                        b',' => continue 'value,
                        b']' => match stack.pop() {
                            Some(Frame::Array(items)) => done = Value::Array(items),
                            _ => return None,
                        },
                        _ => return None,
                    }
                }
                Some(Frame::Object(members, key)) => {
                    members.push((std::mem::take(key), done));
                    match p.next()? {
                        b',' => {
                            p.skip_ws();
                            *key = p.key()?;
                            continue 'value;
                        }
                        b'}' => match stack.pop() {
                            Some(Frame::Object(members, _)) => done = Value::Object(members),
                            _ => return None,
                        },
                        _ => return None,
                    }
                }
            }
        }
    }
}

/// What kind of value [`scan_top_level`] passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool(bool),
    Number,
    String,
    Array,
    Object,
}

/// A value validated where it lies in the text, not built: its kind and the
/// span of its text (a string's includes the quotes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    pub kind: Kind,
    pub span: std::ops::Range<usize>,
}

impl Raw {
    /// For a string, the span of its literal between the quotes (escapes
    /// undecoded), as [`string_at`] and [`take_string`] take it.
    pub fn literal(&self) -> std::ops::Range<usize> {
        let start = (self.span.start + 1).min(self.span.end);
        start..self.span.end.saturating_sub(1).max(start)
    }
}

/// Checks `bytes` against the grammar `JSON.parse` accepts, building
/// nothing, and calls `member(key, value)` for each member of a top-level
/// object, in source order (duplicates included: the caller keeps the last,
/// as `JSON.parse` does). `key` is the span of the key's literal between its
/// quotes. `None` when `JSON.parse` would throw, `Some(true)` for an object,
/// `Some(false)` for any other value.
///
/// Memory is one bit per open container. Only top-level fields of a script's
/// stdout matter (§2.3), and a tree of deep or wide input takes 50 to 160
/// times the size of its text.
///
/// `bytes` need not be UTF-8: JSON allows non-ASCII bytes only inside
/// strings, where any of them pass, and an invalid sequence decodes to
/// U+FFFD (also not allowed outside strings) without swallowing the ASCII
/// byte after it. So the answer is `JSON.parse`'s on the text as Node
/// decodes it.
pub fn scan_top_level(
    bytes: &[u8],
    mut member: impl FnMut(std::ops::Range<usize>, Raw),
) -> Option<bool> {
    let mut p = Parser { bytes, pos: 0 };
    p.skip_ws();
    let object = p.peek() == Some(b'{');
    if object {
        p.pos += 1;
        p.skip_ws();
        if !p.eat(b'}') {
            loop {
                let key = p.key_span()?;
                let start = p.pos;
                let kind = p.skip_value()?;
                member(
                    key,
                    Raw {
                        kind,
                        span: start..p.pos,
                    },
                );
                p.skip_ws();
                match p.next()? {
                    b',' => p.skip_ws(),
                    b'}' => break,
                    _ => return None,
                }
            }
        }
    } else {
        p.skip_value()?;
    }
    p.skip_ws();
    (p.pos == bytes.len()).then_some(object)
}

/// The length of the JSON value at the very start of `bytes` (no leading
/// whitespace), whatever follows it; `None` when no valid value starts
/// there. For telling a whole object from one with text around it
/// (output::stray_text), validating as [`scan_top_level`] does.
pub fn value_len(bytes: &[u8]) -> Option<usize> {
    let mut p = Parser { bytes, pos: 0 };
    p.skip_value()?;
    Some(p.pos)
}

/// The string literal at `lit` (a span from [`scan_top_level`], between the
/// quotes) decoded, or `None` without decoding when it is too long to be an
/// ASCII word of at most `max_chars` characters: comparing a key with
/// field names never costs more than the names, however long the key.
pub fn short_string_at(
    bytes: &[u8],
    lit: std::ops::Range<usize>,
    max_chars: usize,
) -> Option<String> {
    // No ASCII character takes more than six bytes in a literal (`\u0072`).
    if lit.len() > max_chars.saturating_mul(6) {
        return None;
    }
    Some(string_at(bytes, lit))
}

/// The validated string literal at `lit` (between the quotes) decoded, with
/// invalid UTF-8 replaced as Node's decoder replaces it.
pub fn string_at(bytes: &[u8], lit: std::ops::Range<usize>) -> String {
    let mut out = String::new();
    let end = lit.end.min(bytes.len());
    let mut p = Parser {
        bytes: bytes.get(..end).unwrap_or_default(),
        pos: lit.start.min(end),
    };
    // Unreachable for a validated span; a broken one yields what decoded.
    let _ = p.chars_into(&mut out, end);
    out
}

/// JavaScript's `String(value)` for the validated value `raw` of `bytes`,
/// computed from the text without building the value, so its cost is the
/// string it returns (at most about five times the value's text: `[{},{}]`
/// gives "[object Object],[object Object]").
///
/// Arrays follow `Array.prototype.join(",")`: null elements become "", nested
/// arrays are joined in place (`[1,[2,3]]` → "1,2,3"), objects become
/// "[object Object]".
///
/// Two inputs make JS throw instead, and here give a string: an object with
/// its own `toString` key (JS: "Cannot convert object to primitive value")
/// still renders "[object Object]", and arrays nested a few thousand deep
/// (JS: "Maximum call stack size exceeded") are joined to the string JS
/// would produce given enough stack. A loop must not crash on a script's
/// output, and the spec (§2.3) only describes the non-throwing case.
pub fn js_string_at(bytes: &[u8], raw: &Raw) -> String {
    let text = |span: std::ops::Range<usize>| bytes.get(span).unwrap_or_default();
    match raw.kind {
        Kind::Null => "null".to_string(),
        Kind::Bool(b) => b.to_string(),
        Kind::Number => number_to_js_string(number_at(text(raw.span.clone()))),
        Kind::String => string_at(bytes, raw.literal()),
        Kind::Object => "[object Object]".to_string(),
        Kind::Array => {
            let mut out = String::new();
            let end = raw.span.end.min(bytes.len());
            let mut p = Parser {
                bytes: text(0..end),
                pos: raw.span.start,
            };
            // Unreachable for a validated span; a broken one yields what
            // was joined so far.
            let _ = p.join_into(&mut out);
            out
        }
    }
}

/// The value of a validated number literal.
fn number_at(literal: &[u8]) -> f64 {
    // Rust's float parsing is correctly rounded, as ECMAScript requires, and
    // gives ±Infinity or ±0 out of range as JS does.
    std::str::from_utf8(literal)
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A stack of bits, one per open container (object or array), so that
/// skipping nesting a million deep costs 125 kB, not a frame per level.
#[derive(Default)]
struct BitStack {
    words: Vec<u64>,
    len: usize,
}

impl BitStack {
    fn push(&mut self, bit: bool) {
        let (word, shift) = (self.len / 64, self.len % 64);
        if word == self.words.len() {
            self.words.push(0);
        }
        let mask = 1u64 << shift;
        if let Some(w) = self.words.get_mut(word) {
            *w = if bit { *w | mask } else { *w & !mask };
        }
        self.len += 1;
    }

    fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    fn last(&self) -> Option<bool> {
        let i = self.len.checked_sub(1)?;
        let word = self.words.get(i / 64)?;
        Some(word >> (i % 64) & 1 == 1)
    }
}

/// An open container while parsing: the parser keeps these on a heap stack
/// instead of recursing.
enum Frame {
    Array(Vec<Value>),
    /// Members so far, and the key whose value is being parsed.
    Object(Vec<(String, Value)>, String),
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// JSON whitespace is exactly these four; JS's wider notion (NBSP, U+2028,
    /// BOM, vertical tab) is rejected by `JSON.parse`.
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Option<Value> {
        self.word(word)?;
        Some(value)
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        if self.bytes.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Some(())
        } else {
            None
        }
    }

    /// An object key and its colon; the caller has skipped whitespace.
    fn key(&mut self) -> Option<String> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let mut key = String::new();
        self.string_into(&mut key)?;
        self.skip_ws();
        self.eat(b':').then_some(key)
    }

    /// [`Parser::key`] without decoding: the span between the quotes. Also
    /// skips the whitespace after the colon.
    fn key_span(&mut self) -> Option<std::ops::Range<usize>> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let span = self.skip_string()?;
        self.skip_ws();
        if !self.eat(b':') {
            return None;
        }
        self.skip_ws();
        Some(span)
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: the literal's span.
    fn number_span(&mut self) -> Option<std::ops::Range<usize>> {
        let start = self.pos;
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.eat(b'.') && self.digits() == 0 {
            return None;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(start..self.pos)
    }

    /// A number converted with correct rounding like JS (out-of-range
    /// magnitudes give ±Infinity or ±0).
    fn number(&mut self) -> Option<f64> {
        let span = self.number_span()?;
        Some(number_at(self.bytes.get(span)?))
    }

    /// A string literal starting at its opening quote, decoded onto `out`.
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        self.pos += 1;
        self.chars_into(out, usize::MAX)?;
        (self.next()? == b'"').then_some(())
    }

    /// Decodes a string literal's characters onto `out` up to its closing
    /// quote (left unread) or `end`.
    fn chars_into(&mut self, out: &mut String, end: usize) -> Option<()> {
        loop {
            let start = self.pos;
            self.pos += plain_run(self.bytes.get(start..).unwrap_or_default());
            // The run stops at an ASCII byte or the end, so it ends a UTF-8
            // sequence, valid or not; Node's decoder replaces an invalid one
            // within it the same way whatever comes after.
            let run = self.bytes.get(start..self.pos).unwrap_or_default();
            match std::str::from_utf8(run) {
                Ok(s) => out.push_str(s),
                Err(_) => out.push_str(&String::from_utf8_lossy(run)),
            }
            if self.pos >= end {
                return Some(());
            }
            match self.peek()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.pos += 1;
                    self.escape(out)?
                }
                // A raw control character U+0000..U+001F.
                _ => return None,
            }
        }
    }

    /// Checks the string literal at the opening quote without building it;
    /// returns the span between the quotes.
    fn skip_string(&mut self) -> Option<std::ops::Range<usize>> {
        self.pos += 1;
        let start = self.pos;
        loop {
            self.pos += plain_run(self.bytes.get(self.pos..).unwrap_or_default());
            match self.next()? {
                b'"' => return Some(start..self.pos - 1),
                // Every escape is valid on its own: a `\u` surrogate that
                // does not pair is U+FFFD, not an error (see `escape`).
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        self.hex4()?;
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
    }

    /// Checks one value (whitespace before it skipped) without building it,
    /// and says what kind it was. Iterative, with a bit per open container.
    fn skip_value(&mut self) -> Option<Kind> {
        let kind = match self.peek()? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' => Kind::Bool(true),
            b'f' => Kind::Bool(false),
            b'n' => Kind::Null,
            _ => Kind::Number,
        };
        // true for an open object, false for an open array.
        let mut open = BitStack::default();
        'value: loop {
            match self.peek()? {
                b'{' => {
                    self.pos += 1;
                    self.skip_ws();
                    if !self.eat(b'}') {
                        open.push(true);
                        self.key_span()?;
                        continue 'value;
                    }
                }
                b'[' => {
                    self.pos += 1;
                    self.skip_ws();
                    if !self.eat(b']') {
                        open.push(false);
                        continue 'value;
                    }
                }
                b'"' => {
                    self.skip_string()?;
                }
                b't' => self.word(b"true")?,
                b'f' => self.word(b"false")?,
                b'n' => self.word(b"null")?,
                b'-' | b'0'..=b'9' => {
                    self.number_span()?;
                }
                _ => return None,
            }
            // A complete value: close as many containers as the input closes
            // here. Whitespace after the outermost value is not its own.
            while let Some(in_object) = open.last() {
                self.skip_ws();
                match (self.next()?, in_object) {
                    (b',', true) => {
                        self.skip_ws();
                        self.key_span()?;
                        continue 'value;
                    }
                    (b',', false) => {
                        self.skip_ws();
                        continue 'value;
                    }
                    (b'}', true) | (b']', false) => open.pop(),
                    _ => return None,
                }
            }
            return Some(kind);
        }
    }

    /// `String(array)` for the validated array at `pos`, appended: JS's
    /// `join(",")` flattens nested arrays, so each `,` in an array is one in
    /// the output, whatever the depth; null elements are empty; an object
    /// element is "[object Object]". No stack: the token before an element
    /// (`[` or `,`) already says whether it needs a separator.
    fn join_into(&mut self, out: &mut String) -> Option<()> {
        while let Some(b) = self.peek() {
            match b {
                b',' => {
                    out.push(',');
                    self.pos += 1;
                }
                b'{' => {
                    out.push_str("[object Object]");
                    self.skip_value()?;
                }
                b'"' => self.string_into(out)?,
                b't' => {
                    self.word(b"true")?;
                    out.push_str("true");
                }
                b'f' => {
                    self.word(b"false")?;
                    out.push_str("false");
                }
                b'n' => self.word(b"null")?,
                b'-' | b'0'..=b'9' => {
                    let n = self.number()?;
                    out.push_str(&number_to_js_string(n));
                }
                // Brackets and whitespace.
                _ => self.pos += 1,
            }
        }
        Some(())
    }

    /// The escape after a backslash.
    fn escape(&mut self, out: &mut String) -> Option<()> {
        let c = match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                match unit {
                    0xD800..=0xDBFF => {
                        // Combine with an immediately following escaped low
                        // surrogate; otherwise the high one is lone.
                        let save = self.pos;
                        let low = if self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u") {
                            self.pos += 2;
                            self.hex4()
                        } else {
                            None
                        };
                        match low {
                            Some(low @ 0xDC00..=0xDFFF) => {
                                let cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                                char::from_u32(cp).unwrap_or('\u{FFFD}')
                            }
                            _ => {
                                // Not a pair: whatever follows is parsed on
                                // its own (it may itself be a valid escape or
                                // an error).
                                self.pos = save;
                                '\u{FFFD}'
                            }
                        }
                    }
                    0xDC00..=0xDFFF => '\u{FFFD}',
                    _ => char::from_u32(unit).unwrap_or('\u{FFFD}'),
                }
            }
            _ => return None,
        };
        out.push(c);
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.pos..self.pos + 4)?;
        let mut unit = 0u32;
        for &d in digits {
            unit = unit * 16 + (d as char).to_digit(16)?;
        }
        self.pos += 4;
        Some(unit)
    }
}

/// The string literal at `span` of `text` (a [`Raw::literal`]),
/// decoded inside `text`'s own buffer: escapes only ever shrink, so the
/// decoded bytes are written at or before the ones being read.
pub fn take_string(text: String, span: std::ops::Range<usize>) -> String {
    let mut bytes = text.into_bytes();
    let end = span.end.min(bytes.len());
    let (mut r, mut w) = (span.start.min(end), 0);
    while r < end {
        let run = plain_run(bytes.get(r..end).unwrap_or_default());
        bytes.copy_within(r..r + run, w);
        r += run;
        w += run;
        if r >= end {
            break;
        }
        // A backslash (the span was validated): decode this one escape from
        // a copy, at most `\uXXXX\uXXXX`.
        let mut esc = [0u8; 12];
        let n = (end - r).min(esc.len());
        esc[..n].copy_from_slice(&bytes[r..r + n]);
        let mut p = Parser {
            bytes: &esc[..n],
            pos: 1,
        };
        let mut c = String::new();
        if p.escape(&mut c).is_none() {
            // Not reachable for a validated span; stop rather than loop.
            break;
        }
        bytes[w..w + c.len()].copy_from_slice(c.as_bytes());
        w += c.len();
        r += p.pos;
    }
    bytes.truncate(w);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Length of the leading run of `bytes` that a JSON string copies verbatim:
/// up to the first `"`, `\\` or control character.
///
/// A structured result can be most of a 256 MiB stdout, so this checks eight
/// bytes per step (SWAR) before finishing byte by byte.
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut skipped = 0;
    for chunk in bytes.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = w ^ (ONES * u64::from(b'"'));
        let backslash = w ^ (ONES * u64::from(b'\\'));
        // Classic "has zero byte" / "has byte less than n" tests: nonzero
        // exactly when some byte is a quote, a backslash, or below 0x20.
        let special = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (w.wrapping_sub(ONES * 0x20) & !w);
        if special & HIGHS != 0 {
            break;
        }
        skipped += 8;
    }
    let rest = bytes.get(skipped..).unwrap_or_default();
    skipped
        + rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(rest.len())
}

/// JavaScript's `String(value)` for a value `JSON.parse` produced: the
/// tree-walking counterpart of [`js_string_at`], kept as its test oracle.
#[cfg(test)]
pub fn to_js_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let mut out = String::new();
            join_into(&mut out, items);
            out
        }
        other => {
            let mut out = String::new();
            push_scalar(&mut out, other);
            out
        }
    }
}

/// `String()` of a non-array value, appended. (Arrays go through `join_into`.)
#[cfg(test)]
fn push_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_to_js_string(*n)),
        Value::String(s) => out.push_str(s),
        Value::Object(_) => out.push_str("[object Object]"),
        Value::Array(items) => join_into(out, items),
    }
}

/// `items.join(",")` with nested arrays flattened, walked with a heap stack.
#[cfg(test)]
fn join_into<'a>(out: &mut String, items: &'a [Value]) {
    // Per open array: its remaining elements and whether one was emitted yet.
    let mut stack: Vec<(std::slice::Iter<'a, Value>, bool)> = vec![(items.iter(), false)];
    while let Some((iter, started)) = stack.last_mut() {
        let Some(item) = iter.next() else {
            stack.pop();
            continue;
        };
        if *started {
            out.push(',');
        }
        *started = true;
        match item {
            // join() turns null and undefined elements into "".
            Value::Null => {}
            Value::Array(inner) => stack.push((inner.iter(), false)),
            scalar => push_scalar(out, scalar),
        }
    }
}

/// ECMAScript `Number::toString(10)`: the shortest digits that round-trip,
/// in plain notation when the decimal exponent is in (-7, 21), otherwise
/// `d.ddde±x`.
pub fn number_to_js_string(n: f64) -> String {
    if n.is_nan() {
        return "NaN".to_string();
    }
    if n == 0.0 {
        // Both zeros print "0".
        return "0".to_string();
    }
    if n.is_infinite() {
        return if n > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    let mut out = String::new();
    if n < 0.0 {
        out.push('-');
    }
    let sci = shortest_sci(n.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0');
    let k = digits.len() as i32;
    // Position of the decimal point relative to the digits ("n" in the spec).
    let point = exp + 1;
    if k <= point && point <= 21 {
        out.push_str(digits);
        out.extend(std::iter::repeat('0').take((point - k) as usize));
    } else if 0 < point && point <= 21 {
        let (int, frac) = digits.split_at(point as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat('0').take((-point) as usize));
        out.push_str(digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&exp.unsigned_abs().to_string());
    }
    out
}

/// A number as `JSON.stringify` writes it: [`number_to_js_string`] when
/// finite, `null` otherwise (JSON has no Infinity or NaN). Every number
/// loopx writes into JSON goes through here, so what it writes always
/// parses.
pub fn number_json(n: f64) -> String {
    if n.is_finite() {
        number_to_js_string(n)
    } else {
        "null".to_string()
    }
}

/// The digits ECMAScript picks for a positive finite `x`, as `d.ddde±x`.
///
/// Rust's `{:e}` gives the shortest length k that round-trips, but when two
/// k-digit decimals are equally close to `x` it rounds the tie up, where
/// ECMAScript takes the even one (1611967745300168.25 → JS "…168.2", `{:e}`
/// "…168.3"). Rust's fixed-precision formatting is exact with ties to even,
/// so the closest k-digit decimal is taken from it, provided it still
/// round-trips (ECMAScript only considers decimals that do; near a power of
/// two the closest one may not). The node differential test below checks
/// this against V8 on tens of thousands of doubles.
fn shortest_sci(x: f64) -> String {
    let shortest = format!("{x:e}");
    let k = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.bytes().filter(u8::is_ascii_digit).count());
    // With 15 or fewer digits there is only one candidate (every such decimal
    // maps to a distinct double), so ties need k >= 16; skip the second
    // formatting otherwise.
    if k < 16 {
        return shortest;
    }
    let closest = format!("{:.*e}", k - 1, x);
    if closest != shortest && closest.parse::<f64>() == Ok(x) {
        closest
    } else {
        shortest
    }
}

/// Appends `s` quoted as `JSON.stringify` quotes a string: `"` and `\`
/// escaped, `\b \f \n \r \t` by name, other controls below U+0020 as `\u00xx`
/// (lowercase hex); everything else, including `/`, U+2028/U+2029 and
/// non-ASCII, literal.
pub fn write_json_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut run_start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped: Option<&str> = match b {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            0x0c => Some("\\f"),
            b'\n' => Some("\\n"),
            b'\r' => Some("\\r"),
            b'\t' => Some("\\t"),
            0x00..=0x1f => None,
            _ => continue,
        };
        // `i` is an ASCII byte, hence a char boundary.
        out.push_str(&s[run_start..i]);
        run_start = i + 1;
        match escaped {
            Some(e) => out.push_str(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
        }
    }
    out.push_str(&s[run_start..]);
    out.push('"');
}

/// One JSON object written field by field, in the order given (the run log
/// and `loopx status --json`).
#[derive(Clone)]
pub struct Object {
    out: String,
}

impl Default for Object {
    fn default() -> Object {
        Object {
            out: String::from("{"),
        }
    }
}

impl Object {
    fn key(&mut self, k: &str) {
        if self.out.len() > 1 {
            self.out.push(',');
        }
        write_json_string(&mut self.out, k);
        self.out.push(':');
    }

    pub fn str(mut self, k: &str, v: &str) -> Object {
        self.key(k);
        write_json_string(&mut self.out, v);
        self
    }

    pub fn opt_str(self, k: &str, v: Option<&str>) -> Object {
        match v {
            Some(v) => self.str(k, v),
            None => self.raw(k, "null"),
        }
    }

    pub fn num(self, k: &str, v: u64) -> Object {
        self.raw(k, &v.to_string())
    }

    pub fn opt_num(self, k: &str, v: Option<u64>) -> Object {
        match v {
            Some(v) => self.num(k, v),
            None => self.raw(k, "null"),
        }
    }

    pub fn int(self, k: &str, v: i64) -> Object {
        self.raw(k, &v.to_string())
    }

    pub fn bool(self, k: &str, v: bool) -> Object {
        self.raw(k, if v { "true" } else { "false" })
    }

    /// A value that is JSON already, or no member at all when None (an
    /// extension field that is absent when unused).
    pub fn raw_if(self, k: &str, json: Option<&str>) -> Object {
        match json {
            Some(json) => self.raw(k, json),
            None => self,
        }
    }

    /// A value that is JSON already.
    pub fn raw(mut self, k: &str, json: &str) -> Object {
        self.key(k);
        self.out.push_str(json);
        self
    }

    pub fn finish(mut self) -> String {
        self.out.push('}');
        self.out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn value_len_measures_the_leading_value_only() {
        assert_eq!(value_len(br#"{"a":[1,{"b":"}"}]} tail"#), Some(19));
        assert_eq!(value_len(b"{}{}"), Some(2));
        assert_eq!(value_len(b"[1, 2]\n"), Some(6));
        assert_eq!(value_len(br#"{"a":1"#), None);
        assert_eq!(value_len(b" {}"), None);
        assert_eq!(value_len(b""), None);
    }

    fn s(x: &str) -> Value {
        Value::String(x.to_string())
    }

    fn num(text: &str) -> f64 {
        match parse(text) {
            Some(Value::Number(n)) => n,
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    fn str_of(text: &str) -> String {
        match parse(text) {
            Some(Value::String(ref s)) => s.clone(),
            other => panic!("{text:?} parsed as {other:?}"),
        }
    }

    /// `String()` of the value `text`, by the tree and by the scan, which
    /// must agree.
    fn js(text: &str) -> String {
        let v = parse(text).unwrap_or_else(|| panic!("{text:?} did not parse"));
        let tree = to_js_string(&v);
        let wrapped = format!("{{\"v\":{text}}}");
        let (_, members) = scanned(&wrapped).expect("scans");
        assert_eq!(
            js_string_at(wrapped.as_bytes(), &members[0].1),
            tree,
            "{text}"
        );
        tree
    }

    /// The members `scan_top_level` reports, keys decoded.
    fn scanned(text: &str) -> Option<(bool, Vec<(String, Raw)>)> {
        let mut members = Vec::new();
        let object = scan_top_level(text.as_bytes(), |key, value| {
            members.push((string_at(text.as_bytes(), key), value))
        })?;
        Some((object, members))
    }

    /// Top-level string values, decoded from their span or in place, equal
    /// what `parse` gives.
    #[test]
    fn top_level_string_spans_decode_like_parse() {
        let literals = [
            r#""""#,
            r#""plain""#,
            r#""a\"b\\c\/d\b\f\n\r\t""#,
            r#""\u0041\u00e9\u20ac\ud83d\ude00 end""#,
            r#""lone \ud800 high, lone \udc00 low, \ud800\u0041, \ud800\n""#,
            r#""\ud800\ud800\udc00""#,
            r#""héllo wörld €""#,
            r#""tail escape \ud83d\ude00""#,
        ];
        for lit in literals {
            let text = format!(r#"{{"k": 1, "result" : {lit}, "z":[{lit}]}}"#);
            let expected = match parse(&text).as_ref().and_then(|v| v.get("result")) {
                Some(Value::String(s)) => s.clone(),
                other => panic!("{lit} parsed as {other:?}"),
            };
            let (object, members) = scanned(&text).expect("scans");
            assert!(object);
            let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["k", "result", "z"], "{lit}");
            let result = &members[1].1;
            assert_eq!(result.kind, Kind::String);
            assert_eq!(&text[result.span.clone()], lit);
            assert_eq!(string_at(text.as_bytes(), result.literal()), expected);
            assert_eq!(js_string_at(text.as_bytes(), result), expected);
            assert_eq!(js_string_at(text.as_bytes(), &members[2].1), expected);
            let taken = take_string(text.clone(), result.literal());
            assert_eq!(taken, expected, "{lit}");
        }
    }

    #[test]
    fn scanning_rejects_what_parse_rejects() {
        for bad in [
            r#"{"result":"\x"}"#,
            r#"{"result":"\u12"}"#,
            "{\"result\":\"a\u{1}\"}",
            r#"{"result":"open"#,
            r#"{"result":"ok"} trailing"#,
            r#"{"a":[1,{"b":2]}}"#,
            r#"{"a":{"b":2}]}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":{"b"}}"#,
            r#"{"a":{,}}"#,
            r#"{"a":[1 2]}"#,
        ] {
            assert_eq!(parse(bad), None, "{bad}");
            assert_eq!(scanned(bad), None, "{bad}");
        }
    }

    #[test]
    fn scanning_reports_members_in_order_with_kinds_and_spans() {
        let text = r#" {"n":null,"t":true, "f" :false,"x":-1.5e3,"s":"a","a":[1,{}],"o":{"k":[]},"n":{}} "#;
        let (object, members) = scanned(text).expect("scans");
        assert!(object);
        let got: Vec<(&str, Kind, &str)> = members
            .iter()
            .map(|(k, v)| (k.as_str(), v.kind, &text[v.span.clone()]))
            .collect();
        assert_eq!(
            got,
            [
                ("n", Kind::Null, "null"),
                ("t", Kind::Bool(true), "true"),
                ("f", Kind::Bool(false), "false"),
                ("x", Kind::Number, "-1.5e3"),
                ("s", Kind::String, "\"a\""),
                ("a", Kind::Array, "[1,{}]"),
                ("o", Kind::Object, "{\"k\":[]}"),
                ("n", Kind::Object, "{}"),
            ]
        );
        // Other values are valid but have no members.
        for text in ["[]", " 1 ", "\"{\"", "null", "[{\"result\":1}]"] {
            assert_eq!(scanned(text), Some((false, vec![])), "{text}");
        }
        assert_eq!(scanned("{}"), Some((true, vec![])));
    }

    #[test]
    fn short_strings_only_are_decoded_for_comparison() {
        let text = r#"{"result":1,"\u0072\u0065\u0073\u0075\u006c\u0074":2,"resultx":3}"#;
        let mut keys = Vec::new();
        scan_top_level(text.as_bytes(), |key, _| {
            keys.push(short_string_at(text.as_bytes(), key, 6))
        })
        .expect("scans");
        assert_eq!(
            keys,
            [
                Some("result".into()),
                Some("result".into()),
                Some("resultx".into())
            ]
        );
        let long = format!(r#"{{"{}":1}}"#, "r".repeat(37));
        scan_top_level(long.as_bytes(), |key, _| {
            assert_eq!(short_string_at(long.as_bytes(), key, 6), None)
        })
        .expect("scans");
    }

    #[test]
    fn scanning_takes_bytes_that_are_not_utf8_inside_strings_only() {
        let bytes = b"{\"r\xffx\":\"a\xc3\",\"z\":[\"\xed\xa0\x80\"]}";
        let mut members = Vec::new();
        assert_eq!(
            scan_top_level(bytes, |k, v| members.push((string_at(bytes, k), v))),
            Some(true)
        );
        assert_eq!(members[0].0, "r\u{FFFD}x");
        assert_eq!(js_string_at(bytes, &members[0].1), "a\u{FFFD}");
        assert_eq!(
            js_string_at(bytes, &members[1].1),
            "\u{FFFD}\u{FFFD}\u{FFFD}"
        );
        assert_eq!(scan_top_level(b"{\"a\":1}\xff", |_, _| ()), None);
        assert_eq!(scan_top_level(b"{\"a\":\xff}", |_, _| ()), None);
    }

    #[test]
    fn parses_scalars() {
        assert_eq!(parse("null"), Some(Value::Null));
        assert_eq!(parse("true"), Some(Value::Bool(true)));
        assert_eq!(parse("false"), Some(Value::Bool(false)));
        assert_eq!(parse("\"hi\""), Some(s("hi")));
        assert_eq!(parse("42"), Some(Value::Number(42.0)));
    }

    #[test]
    fn parses_containers_in_order_with_duplicates() {
        let v = parse(r#"{"a":1,"b":[true,null,"x"],"a":2}"#).unwrap();
        assert_eq!(
            v,
            Value::Object(vec![
                ("a".into(), Value::Number(1.0)),
                (
                    "b".into(),
                    Value::Array(vec![Value::Bool(true), Value::Null, s("x")])
                ),
                ("a".into(), Value::Number(2.0)),
            ])
        );
        // JSON.parse: the last duplicate wins.
        assert_eq!(v.get("a"), Some(&Value::Number(2.0)));
        assert_eq!(v.get("zzz"), None);
        assert_eq!(Value::Array(vec![]).get("a"), None);
        assert_eq!(parse("{}"), Some(Value::Object(vec![])));
        assert_eq!(parse("[]"), Some(Value::Array(vec![])));
    }

    #[test]
    fn whitespace_is_only_the_four_json_characters() {
        assert_eq!(
            parse(" \t\r\n[ 1 ,\t2 ]\r\n "),
            Some(Value::Array(vec![Value::Number(1.0), Value::Number(2.0)]))
        );
        assert_eq!(
            parse(" { \"a\" : 1 } ").and_then(|v| v.get("a").map(|_| ())),
            Some(())
        );
        for bad in [
            "\u{b}1",
            "\u{c}1",
            "\u{a0}1",
            "\u{2028}1",
            "1\u{feff}",
            "\u{feff}{}",
            "\u{85}1",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        for bad in [
            "",
            " ",
            "[1,]",
            "{\"a\":1,}",
            "[,1]",
            "{,}",
            "[1 2]",
            "{\"a\" 1}",
            "{\"a\":}",
            "{a:1}",
            "{'a':1}",
            "'x'",
            "// c\n1",
            "/* c */1",
            "1 // c",
            "01",
            "-01",
            "00",
            "-",
            "--1",
            "+1",
            "1.",
            ".5",
            "-.5",
            "1.e5",
            "1e",
            "1e+",
            "1E-",
            "0x10",
            "NaN",
            "Infinity",
            "-Infinity",
            "tru",
            "truee",
            "nul",
            "True",
            "undefined",
            "\"abc",
            "\"\\x\"",
            "\"\\U0041\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "\"\\",
            "[",
            "]",
            "{",
            "}",
            "[1",
            "{\"a\":1",
            "1 2",
            "{} {}",
            "[]]",
            "{}}",
            "nullx",
            "\"a\"b",
            "\"\u{0}\"",
            "\"\u{1f}\"",
            "\"a\nb\"",
            "\"\t\"",
            "{\"a\":1 \"b\":2}",
            "[1,,2]",
            ":",
            ",",
        ] {
            assert_eq!(parse(bad), None, "{bad:?} must be rejected");
        }
    }

    #[test]
    fn numbers_follow_the_json_grammar_and_js_conversion() {
        assert_eq!(num("0"), 0.0);
        assert!(num("-0").is_sign_negative());
        assert_eq!(num("-12.5e2"), -1250.0);
        assert_eq!(num("1E+2"), 100.0);
        assert_eq!(num("1e-2"), 0.01);
        assert_eq!(num("0.5"), 0.5);
        assert_eq!(num("0e0"), 0.0);
        assert_eq!(num("1e400"), f64::INFINITY);
        assert_eq!(num("-1e400"), f64::NEG_INFINITY);
        assert_eq!(num("1e-400"), 0.0);
        assert_eq!(num("12345678901234567890"), 12345678901234567890.0);
        assert_eq!(num("0.1"), 0.1);
        // Correct rounding on a halfway-ish long literal.
        assert_eq!(num("9007199254740993"), 9007199254740992.0);
        assert_eq!(num("1e99999999999999999999"), f64::INFINITY);
    }

    #[test]
    fn string_escapes() {
        assert_eq!(str_of(r#""\"\\\/\b\f\n\r\t""#), "\"\\/\u{8}\u{c}\n\r\t");
        assert_eq!(str_of(r#""\u0041\u00e9\u00E9\u2028""#), "Aéé\u{2028}");
        assert_eq!(str_of(r#""\u0000""#), "\u{0}");
        // Raw non-ASCII and DEL pass through literally.
        assert_eq!(str_of("\"é😀\u{7f}\u{2028}\""), "é😀\u{7f}\u{2028}");
    }

    #[test]
    fn surrogate_escapes() {
        // A valid pair is the real character.
        assert_eq!(str_of(r#""\ud83d\ude00""#), "😀");
        assert_eq!(str_of(r#""\uD83D\uDE00""#), "😀");
        // Lone surrogates become U+FFFD, as Node encodes them to UTF-8.
        assert_eq!(str_of(r#""\ud800""#), "\u{FFFD}");
        assert_eq!(str_of(r#""\udc00""#), "\u{FFFD}");
        assert_eq!(str_of(r#""a\ud800b""#), "a\u{FFFD}b");
        assert_eq!(str_of(r#""\ude00\ud83d""#), "\u{FFFD}\u{FFFD}");
        assert_eq!(str_of(r#""\ud83d\ud83d\ude00""#), "\u{FFFD}😀");
        assert_eq!(str_of(r#""\ud800\n""#), "\u{FFFD}\n");
        assert_eq!(str_of(r#""\ud800\u0041""#), "\u{FFFD}A");
        // A broken escape after a high surrogate is still an error.
        assert_eq!(parse(r#""\ud800\u00""#), None);
        assert_eq!(parse(r#""\ud800\x""#), None);
    }

    #[test]
    fn deep_nesting_neither_overflows_nor_panics() {
        let depth = 1_000_000;
        let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let v = parse(&deep).expect("V8 accepts deep nesting");
        assert_eq!(to_js_string(&v), "");
        drop(v);

        // Other shapes at a depth that keeps debug-build tests quick; the
        // code paths are the same.
        let depth = 100_000;
        let deep_obj = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
        assert!(matches!(parse(&deep_obj), Some(Value::Object(_))));

        // Unclosed or mismatched deep input is rejected, also without crashing.
        assert_eq!(parse(&"[".repeat(1_000_000)), None);
        assert_eq!(
            parse(&format!("{}{}", "[".repeat(depth), "}".repeat(depth))),
            None
        );

        let deep_values = format!("{}{}", "[1,".repeat(depth), "]".repeat(depth));
        assert_eq!(
            parse(&deep_values),
            None,
            "trailing comma at the innermost level"
        );
        let deep_values = format!("{}2{}", "[1,".repeat(depth), "]".repeat(depth));
        let v = parse(&deep_values).unwrap();
        let joined = to_js_string(&v);
        assert_eq!(joined.len(), 2 * depth + 1);
        assert!(joined.starts_with("1,1,") && joined.ends_with(",1,2"));
    }

    #[test]
    fn deep_nesting_is_scanned_with_a_bit_per_level() {
        let depth = 1_000_000;
        let text = format!(
            "{{\"o\":{}1{},\"a\":{}{},\"j\":{}2{}}}",
            "{\"a\":".repeat(depth),
            "}".repeat(depth),
            "[".repeat(depth),
            "]".repeat(depth),
            "[1,".repeat(depth),
            "]".repeat(depth),
        );
        let (object, members) = scanned(&text).expect("V8 accepts deep nesting");
        assert!(object);
        let kinds: Vec<Kind> = members.iter().map(|(_, v)| v.kind).collect();
        assert_eq!(kinds, [Kind::Object, Kind::Array, Kind::Array]);
        let bytes = text.as_bytes();
        assert_eq!(js_string_at(bytes, &members[0].1), "[object Object]");
        assert_eq!(js_string_at(bytes, &members[1].1), "");
        let joined = js_string_at(bytes, &members[2].1);
        assert_eq!(joined.len(), 2 * depth + 1);
        assert!(joined.starts_with("1,1,") && joined.ends_with(",1,2"));

        // Unclosed or mismatched deep input is rejected.
        for bad in [
            "[".repeat(depth),
            format!("{}{}", "[".repeat(depth), "}".repeat(depth)),
            format!("{}1{}]", "{\"a\":".repeat(depth), "}".repeat(depth - 1)),
            format!("{}{}", "[1,".repeat(depth), "]".repeat(depth)),
        ] {
            assert_eq!(scanned(&bad), None);
        }
    }

    #[test]
    fn js_string_of_scalars_and_containers() {
        assert_eq!(js("null"), "null");
        assert_eq!(js("true"), "true");
        assert_eq!(js("false"), "false");
        assert_eq!(js("\"a b\""), "a b");
        assert_eq!(js("1.0"), "1");
        assert_eq!(js("{}"), "[object Object]");
        assert_eq!(js(r#"{"a":[1]}"#), "[object Object]");
        assert_eq!(js("[]"), "");
        assert_eq!(js("[1,2,3]"), "1,2,3");
        assert_eq!(js("[1,[2,3]]"), "1,2,3");
        assert_eq!(js("[null]"), "");
        assert_eq!(js("[null,null]"), ",");
        assert_eq!(js("[[]]"), "");
        assert_eq!(js("[[],[]]"), ",");
        assert_eq!(js("[{}]"), "[object Object]");
        assert_eq!(
            js(r#"[true,"x",null,1.5,{},[false,[null]]]"#),
            "true,x,,1.5,[object Object],false,"
        );
        assert_eq!(js("[[1,2],[3,[4,[5]]],6]"), "1,2,3,4,5,6");
    }

    // The tie cases need their exact binary values written out in full.
    #[allow(clippy::excessive_precision)]
    #[test]
    fn number_to_string_follows_ecmascript() {
        let cases: &[(f64, &str)] = &[
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (1.5, "1.5"),
            (-1.5, "-1.5"),
            (100.0, "100"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (-1e21, "-1e+21"),
            (1.5e21, "1.5e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e-6, "0.000001"),
            (1.5e-6, "0.0000015"),
            (1e-7, "1e-7"),
            (-1e-7, "-1e-7"),
            (1.5e-7, "1.5e-7"),
            (123e-20, "1.23e-18"),
            (12345678901234567890.0, "12345678901234567000"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (9007199254740994.0, "9007199254740994"),
            (123.456, "123.456"),
            (0.001, "0.001"),
            (1e100, "1e+100"),
            // Two shortest candidates equally close: ECMAScript takes the even.
            (1611967745300168.25, "1611967745300168.2"),
            (1611967745300168.75, "1611967745300168.8"),
            (-1611967745300168.25, "-1611967745300168.2"),
        ];
        for &(n, want) in cases {
            assert_eq!(number_to_js_string(n), want, "{n:e}");
        }
        assert_eq!(js("12345678901234567890"), "12345678901234567000");
        assert_eq!(js("1e400"), "Infinity");
        assert_eq!(js("1E400"), "Infinity");
        assert_eq!(js("-1E+400"), "-Infinity");
        assert_eq!(js("1e-400"), "0");
        assert_eq!(js("1e-7"), "1e-7");
        assert_eq!(js("123e-20"), "1.23e-18");
        assert_eq!(js("1e308"), "1e+308");
        assert_eq!(js("-0"), "0");
        assert_eq!(js("1e21"), "1e+21");
    }

    fn quoted(x: &str) -> String {
        let mut out = String::from("<");
        write_json_string(&mut out, x);
        out.push('>');
        out
    }

    #[test]
    fn json_string_quoting_matches_stringify() {
        assert_eq!(quoted(""), "<\"\">");
        assert_eq!(quoted("plain"), "<\"plain\">");
        assert_eq!(quoted("a\"b\\c"), r#"<"a\"b\\c">"#);
        assert_eq!(quoted("\u{8}\u{c}\n\r\t"), r#"<"\b\f\n\r\t">"#);
        assert_eq!(
            quoted("\u{0}\u{1}\u{1f}\u{b}"),
            r#"<"\u0000\u0001\u001f\u000b">"#
        );
        assert_eq!(
            quoted("/ é 😀 \u{7f} \u{2028}\u{2029}"),
            "<\"/ é 😀 \u{7f} \u{2028}\u{2029}\">"
        );
        // Round trip through our own reader.
        let tricky = "x\u{0}\"\\\n\u{1e}é😀/";
        let mut out = String::new();
        write_json_string(&mut out, tricky);
        assert_eq!(str_of(&out), tricky);
    }

    /// Runs `node -e script` with `input` on stdin and returns its stdout, or
    /// `None` (after a note) when node is not installed. CI always has node.
    pub(crate) fn node_eval(script: &str, input: String) -> Option<String> {
        use std::io::Write;
        use std::process::{Command, Stdio};

        let child = Command::new("node")
            .args(["-e", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("note: node not available ({e}); skipping the differential test");
                return None;
            }
        };
        let mut stdin = child.stdin.take().expect("piped stdin");
        // Written from a thread so a large input cannot deadlock against
        // node's output filling the pipe.
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().expect("wait for node");
        writer
            .join()
            .expect("writer thread")
            .expect("write to node");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "node failed: {}",
            &stderr[..stderr.len().min(2000)]
        );
        Some(String::from_utf8(out.stdout).expect("node writes UTF-8"))
    }

    /// Number::toString against V8 on many doubles: random bit patterns,
    /// values with few fraction bits at large magnitudes (where two shortest
    /// candidates can tie), and values around the notation thresholds.
    #[test]
    fn number_to_string_differential_against_node() {
        let mut state = 0x0DDB_A11F_u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut values: Vec<f64> = Vec::new();
        for _ in 0..20_000 {
            let f = f64::from_bits(next());
            if f.is_finite() {
                values.push(f);
            }
        }
        for _ in 0..20_000 {
            let int = (next() % (1u64 << 53)) as f64;
            let scale = [1.0, 2.0, 4.0, 8.0, 0.5, 0.25, 0.125, 1e-3, 1e3][(next() % 9) as usize];
            values.push((int + [0.25, 0.75, 0.5, 0.125][(next() % 4) as usize]) * scale);
        }
        // Powers of two (and neighbours) have an asymmetric rounding interval.
        let powers = (0..52u64)
            .map(|k| 1u64 << k)
            .chain((1..2047u64).map(|e| e << 52));
        for bits in powers {
            values.extend([bits - 1, bits, bits + 1].map(f64::from_bits));
        }
        for e in -330..=310 {
            for m in [
                1.0,
                1.5,
                9.999999,
                2.2250738585072014,
                4.940656458412465,
                1.7976931348623157,
            ] {
                values.push(format!("{m}e{e}").parse().unwrap_or(0.0));
            }
        }
        values.retain(|v| v.is_finite());
        let mut input = String::from("[");
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                input.push(',');
            }
            // `{:e}` round-trips exactly, and is valid JSON.
            input.push_str(&format!("{v:e}"));
        }
        input.push(']');

        let script = "const v = JSON.parse(require('fs').readFileSync(0, 'utf8'));\
                      process.stdout.write(JSON.stringify(v.map(String)));";
        let Some(reply) = node_eval(script, input) else {
            return;
        };
        let Some(Value::Array(ref want)) = parse(&reply) else {
            panic!("node output is not an array")
        };
        assert_eq!(want.len(), values.len());
        for (v, w) in values.iter().zip(want) {
            assert_eq!(&Value::String(number_to_js_string(*v)), w, "{v:e}");
        }
    }

    #[test]
    fn objects_are_written_field_by_field() {
        let json = Object::default()
            .str("a", "x\"y")
            .num("n", 3)
            .opt_str("none", None)
            .bool("b", true)
            .int("i", -2)
            .raw("o", Object::default().finish().as_str())
            .finish();
        assert_eq!(
            json,
            r#"{"a":"x\"y","n":3,"none":null,"b":true,"i":-2,"o":{}}"#
        );
        assert!(parse(&json).is_some());
    }
}

/// Property tests: any text is read or refused without a panic, generated
/// JSON reads back as written, nesting depth and number size are unbounded.
#[cfg(test)]
mod props {
    use super::*;
    use crate::testing::{self, config, Json};
    use proptest::prelude::*;

    /// Whether `v` is what `JSON.parse` makes of the text of `m`.
    fn reads_as(v: &Value, m: &Json) -> bool {
        match (v, m) {
            (Value::Null, Json::Null) => true,
            (Value::Bool(a), Json::Bool(b)) => a == b,
            (Value::Number(n), Json::Num(text, _)) => text
                .parse::<f64>()
                .is_ok_and(|x| x.to_bits() == n.to_bits()),
            (Value::String(s), Json::Str(lit)) => *s == lit.value(),
            (Value::Array(items), Json::Arr(models)) => {
                items.len() == models.len() && items.iter().zip(models).all(|(v, m)| reads_as(v, m))
            }
            (Value::Object(members), Json::Obj(models)) => {
                members.len() == models.len()
                    && members
                        .iter()
                        .zip(models)
                        .all(|((k, v), (mk, m))| *k == mk.value() && reads_as(v, m))
            }
            _ => false,
        }
    }

    /// The scan without a tree agrees with `parse` on `text`: same verdict,
    /// and for an object the same members in order, with the same kinds and
    /// the same `String()`.
    fn scan_agrees_with_parse(text: &str) -> Result<(), TestCaseError> {
        let bytes = text.as_bytes();
        let mut members = Vec::new();
        let scanned = scan_top_level(bytes, |k, v| members.push((k, v)));
        let tree = parse(text);
        prop_assert_eq!(scanned.is_some(), tree.is_some(), "{:?}", text);
        let Some(tree) = tree else { return Ok(()) };
        let Value::Object(want) = &tree else {
            prop_assert_eq!(scanned, Some(false), "{:?}", text);
            return Ok(());
        };
        prop_assert_eq!(scanned, Some(true));
        prop_assert_eq!(members.len(), want.len());
        for ((key, raw), (wk, wv)) in members.iter().zip(want) {
            prop_assert_eq!(&string_at(bytes, key.clone()), wk);
            let kind = match wv {
                Value::Null => Kind::Null,
                Value::Bool(b) => Kind::Bool(*b),
                Value::Number(_) => Kind::Number,
                Value::String(_) => Kind::String,
                Value::Array(_) => Kind::Array,
                Value::Object(_) => Kind::Object,
            };
            prop_assert_eq!(raw.kind, kind);
            let reparsed = parse(&text[raw.span.clone()]);
            prop_assert_eq!(reparsed.as_ref(), Some(wv));
            prop_assert_eq!(js_string_at(bytes, raw), to_js_string(wv));
        }
        Ok(())
    }

    /// Fragments that JSON text is made of, so random glue reaches deep
    /// into the grammar rather than failing at the first byte.
    fn soup() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            "\"",
            "\\",
            "\\u",
            "d83d",
            "DC00",
            "u",
            "0",
            "1",
            "-",
            ".",
            "e",
            "E",
            "+",
            "true",
            "fals",
            "null",
            " ",
            "\n",
            "\"result\"",
            "\"goto\"",
            "\"stop\"",
            "1e999",
            "\u{0}",
            "é",
            "\u{2028}",
            "\u{feff}",
        ]);
        prop::collection::vec(pieces, 0..48).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn any_text_is_read_or_refused_without_panicking(
            text in prop_oneof![any::<String>(), soup()]
        ) {
            if let Some(v) = parse(&text) {
                let _ = to_js_string(&v);
            }
            scan_agrees_with_parse(&text)?;
        }

        #[test]
        fn generated_json_reads_back_as_written(
            m in testing::json(false),
            ws in prop::collection::vec(0usize..8, 0..6),
        ) {
            let mut text = Vec::new();
            m.write(&mut text, &ws);
            let text = String::from_utf8(text).unwrap();
            let v = parse(&text);
            prop_assert!(v.as_ref().is_some_and(|v| reads_as(v, &m)), "{text:?} read as {v:?}");
            prop_assert_eq!(to_js_string(v.as_ref().unwrap()), m.js_string());
            scan_agrees_with_parse(&text)?;
        }

        #[test]
        fn objects_are_scanned_as_parse_reads_them(
            members in prop::collection::vec((testing::key(false), testing::json(false)), 0..8),
            ws in prop::collection::vec(0usize..8, 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut text = Vec::new();
            Json::Obj(members).write(&mut text, &ws);
            let text = String::from_utf8(text).unwrap();
            scan_agrees_with_parse(&text)?;
            // Any prefix or any byte dropped: mostly invalid, always agreeing.
            let i = cut.index(text.len() + 1);
            if text.is_char_boundary(i) {
                scan_agrees_with_parse(&text[..i])?;
                let mut dropped = text[..i].to_string();
                if let Some(c) = text[i..].chars().nth(1) {
                    dropped.push(c);
                    dropped.push_str(&text[i..].chars().skip(2).collect::<String>());
                    scan_agrees_with_parse(&dropped)?;
                }
            }
        }

        #[test]
        fn numbers_of_any_size_read_as_javascript_reads_them(
            int in "-?(0|[1-9][0-9]{0,400})",
            frac in proptest::option::of("[0-9]{1,60}"),
            exp in proptest::option::of("[eE][+-]?[0-9]{1,25}"),
        ) {
            let text = format!("{int}{}{}", frac.map(|f| format!(".{f}")).unwrap_or_default(),
                exp.unwrap_or_default());
            let want: f64 = text.parse().unwrap();
            match parse(&text) {
                Some(Value::Number(n)) => prop_assert_eq!(n.to_bits(), want.to_bits(), "{}", text),
                other => prop_assert!(false, "{text} read as {other:?}"),
            }
        }
    }

    proptest! {
        #![proptest_config(config(32))]

        /// V8 accepts any depth; so must a parser of untrusted stdout, and
        /// neither reading, `String()`, nor dropping may overflow the stack.
        #[test]
        fn nesting_of_any_depth_is_read_without_overflow(
            depth in 1usize..200_000,
            (open, close, js) in prop::sample::select(vec![
                ("[", "]", 0u8), ("{\"result\":", "}", 1), ("[1,", "]", 2),
            ]),
            complete in any::<bool>(),
        ) {
            let mut text = open.repeat(depth) + "0" + &close.repeat(depth);
            if !complete {
                text.pop();
            }
            let v = parse(&text);
            prop_assert_eq!(v.is_some(), complete);
            // The scan agrees (not through `scan_agrees_with_parse`: the
            // derived `PartialEq` recurses).
            let mut members = Vec::new();
            let scanned = scan_top_level(text.as_bytes(), |_, v| members.push(v));
            prop_assert_eq!(scanned, complete.then_some(js == 1));
            if let (Some(Value::Object(want)), [raw]) = (&v, members.as_slice()) {
                prop_assert_eq!(js_string_at(text.as_bytes(), raw), to_js_string(&want[0].1));
            }
            if let Some(v) = v {
                let want = match js {
                    0 => "0".to_string(),
                    1 => "[object Object]".to_string(),
                    _ => "1,".repeat(depth) + "0",
                };
                prop_assert_eq!(to_js_string(&v), want);
            }
        }
    }
}
