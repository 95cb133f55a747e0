//! npm version ranges (DESIGN "Semver", §3.2, §10.6) on top of the semver crate.
//!
//! Workflow `package.json` files declare `loopx` ranges in npm's grammar, so a
//! range must be accepted, rejected and matched exactly as node-semver 7 does
//! (strict mode, `includePrerelease: false`). The crate's `VersionReq` speaks
//! Cargo's grammar (bare `1.2.3` means `^1.2.3` there), so it is not used:
//! node-semver's own pipeline is reproduced step by step instead, because its
//! textual rewrites (hyphen ranges, operator trimming, desugaring, star removal)
//! decide which odd inputs are valid, and the differential test below holds the
//! two implementations together. Only the crate's `Version` and `Prerelease`
//! (parsing and precedence) are reused.
//!
//! The pipeline, per `||` alternative: strip build metadata, expand a hyphen
//! range, glue operators to their versions, desugar `^`/`~`/x-ranges into plain
//! comparators, drop stars, then parse each comparator as a full version.

use semver::{BuildMetadata, Prerelease, Version};
use std::cmp::Ordering;

use crate::js_compat::is_js_whitespace;

/// node-semver's limits: a version string longer than this is rejected, and
/// its regexes cap the length of numbers and identifiers accordingly.
const MAX_LENGTH: usize = 256;
const MAX_SAFE_BUILD_LENGTH: usize = MAX_LENGTH - 6;
/// Version numbers are JavaScript numbers there: anything above 2^53-1 is invalid.
const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One comparator; `version: None` is npm's "any version" (the empty comparator).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Comparator {
    op: Op,
    version: Option<Version>,
}

/// A parsed npm range: alternatives (`||`), each a set of comparators that must
/// all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    sets: Vec<Vec<Comparator>>,
}

/// Parses an npm range. `Err` is exactly npm's `validRange(s) === null`; the
/// message says which comparator was refused.
pub fn parse(s: &str) -> Result<Range, String> {
    let raw = collapse_whitespace(s);
    let mut sets = Vec::new();
    for part in raw.split("||") {
        sets.push(parse_set(part.trim_matches(' ').as_bytes())?);
    }
    // npm drops impossible alternatives (`<0.0.0-0`) when others exist, and an
    // alternative that is just "any" swallows the rest. The second rule is not
    // cosmetic: `*` does not match prereleases, so `>=1.0.0-rc <1.0.0 || *`
    // matches no prerelease at all.
    if sets.len() > 1 {
        let first = sets[0].clone();
        sets.retain(|set| !set.first().is_some_and(Comparator::is_null_set));
        if sets.is_empty() {
            sets.push(first);
        } else if let Some(any) = sets
            .iter()
            .find(|set| set.len() == 1 && set[0].version.is_none())
        {
            sets = vec![any.clone()];
        }
    }
    Ok(Range { sets })
}

impl Range {
    /// npm's `satisfies(v, range)`: some alternative holds for `v`, and a
    /// prerelease `v` only counts when a comparator of that same alternative
    /// names a prerelease of the same major.minor.patch.
    pub fn satisfies(&self, v: &Version) -> bool {
        self.sets.iter().any(|set| test_set(set, v))
    }
}

fn test_set(set: &[Comparator], v: &Version) -> bool {
    if !set.iter().all(|c| c.test(v)) {
        return false;
    }
    if v.pre.is_empty() {
        return true;
    }
    set.iter().any(|c| match &c.version {
        Some(a) => !a.pre.is_empty() && (a.major, a.minor, a.patch) == (v.major, v.minor, v.patch),
        None => false,
    })
}

/// Semver precedence: build metadata is ignored (the crate's `Ord` does not
/// ignore it).
fn precedence(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| a.pre.cmp(&b.pre))
}

impl Comparator {
    fn test(&self, v: &Version) -> bool {
        let Some(bound) = &self.version else {
            return true;
        };
        let ord = precedence(v, bound);
        match self.op {
            Op::Eq => ord == Ordering::Equal,
            Op::Lt => ord == Ordering::Less,
            Op::Le => ord != Ordering::Greater,
            Op::Gt => ord == Ordering::Greater,
            Op::Ge => ord != Ordering::Less,
        }
    }

    /// npm's `<0.0.0-0`, which nothing satisfies.
    fn is_null_set(&self) -> bool {
        self.op == Op::Lt
            && self
                .version
                .as_ref()
                .is_some_and(|v| (v.major, v.minor, v.patch) == (0, 0, 0) && v.pre.as_str() == "0")
    }

    /// npm's `COMPARATOR`: an optional operator and a full version (a single
    /// leading `v` allowed), or the empty string for "any".
    fn parse(token: &[u8]) -> Result<Comparator, String> {
        let shown = || String::from_utf8_lossy(token).into_owned();
        if token.is_empty() {
            return Ok(Comparator {
                op: Op::Eq,
                version: None,
            });
        }
        let (op_len, op) = match token {
            [b'<', b'=', ..] => (2, Op::Le),
            [b'>', b'=', ..] => (2, Op::Ge),
            [b'<', ..] => (1, Op::Lt),
            [b'>', ..] => (1, Op::Gt),
            [b'=', ..] => (1, Op::Eq),
            _ => (0, Op::Eq),
        };
        let text = &token[op_len..];
        let invalid = || format!("invalid comparator \"{}\"", shown());
        let body = text.strip_prefix(b"v").unwrap_or(text);
        let (main_pre, build) = split_once(body, b'+');
        let (main, pre) = split_once(main_pre, b'-');
        let numbers: Vec<&[u8]> = main.split(|&b| b == b'.').collect();
        if numbers.len() != 3
            || !numbers.iter().all(|n| is_numeric_ident(n))
            || pre.is_some_and(|p| !all_dotted(p, is_prerelease_ident))
            || build.is_some_and(|b| !all_dotted(b, is_build_ident))
        {
            return Err(invalid());
        }
        if text.len() > MAX_LENGTH {
            return Err(format!(
                "version \"{}\" is longer than {MAX_LENGTH} characters",
                String::from_utf8_lossy(text)
            ));
        }
        let mut parsed = [0u64; 3];
        for (slot, n) in parsed.iter_mut().zip(&numbers) {
            *slot = ascii(n)
                .parse::<u64>()
                .ok()
                .filter(|&n| n <= MAX_SAFE_INTEGER)
                .ok_or_else(|| format!("version number too large in \"{}\"", shown()))?;
        }
        let pre = match pre {
            Some(p) => Prerelease::new(ascii(p)).map_err(|_| invalid())?,
            None => Prerelease::EMPTY,
        };
        Ok(Comparator {
            op,
            version: Some(Version {
                major: parsed[0],
                minor: parsed[1],
                patch: parsed[2],
                pre,
                build: BuildMetadata::EMPTY,
            }),
        })
    }
}

/// One `||` alternative, already trimmed.
fn parse_set(part: &[u8]) -> Result<Vec<Comparator>, String> {
    let part = strip_build_metadata(part);
    let part = replace_hyphen_range(&part).unwrap_or(part);
    let part = trim_comparator_whitespace(&part);
    let part = trim_after(&part, b'~');
    let part = trim_after(&part, b'^');

    let desugared: Vec<Vec<u8>> = part.split(|&b| b == b' ').map(desugar).collect();
    let joined = desugared.join(&b' ');
    let mut comparators = Vec::new();
    for token in split_ws(&joined) {
        // `>=0.0.0` is npm's spelling of "any".
        let token: &[u8] = if token == b">=0.0.0" { b"" } else { token };
        comparators.push(Comparator::parse(token)?);
    }
    if let Some(null) = comparators.iter().find(|c| c.is_null_set()) {
        return Ok(vec![null.clone()]);
    }
    let mut set: Vec<Comparator> = Vec::new();
    for c in comparators {
        if !set.contains(&c) {
            set.push(c);
        }
    }
    if set.len() > 1 {
        set.retain(|c| c.version.is_some());
    }
    Ok(set)
}

/// npm's `parseComparator` for one space-free token: carets, then tildes, then
/// x-ranges (each on every word the previous step produced), then stars.
fn desugar(token: &[u8]) -> Vec<u8> {
    let caret = replace_caret(token);
    let tilde: Vec<Vec<u8>> = split_ws(trim(&caret))
        .into_iter()
        .map(replace_tilde)
        .collect();
    let tilde = tilde.join(&b' ');
    let xrange: Vec<Vec<u8>> = split_ws(&tilde).into_iter().map(replace_xrange).collect();
    replace_star(trim(&xrange.join(&b' ')))
}

/// The pieces of npm's `XRANGEPLAIN` (`[v=\s]*` then `1`, `1.x`, `1.2.3-pre+build`, …).
#[derive(Debug, Clone, Copy)]
struct Partial<'a> {
    major: &'a [u8],
    minor: Option<&'a [u8]>,
    patch: Option<&'a [u8]>,
    pre: Option<&'a [u8]>,
}

/// Matches all of `s` as an `XRANGEPLAIN`. Version bodies contain no spaces, so
/// splitting at the first `-` and `+` finds the only possible parse.
fn partial(s: &[u8]) -> Option<Partial<'_>> {
    let start = s
        .iter()
        .take_while(|&&b| matches!(b, b'v' | b'=' | b' '))
        .count();
    let (main_pre, build) = split_once(&s[start..], b'+');
    let (main, pre) = split_once(main_pre, b'-');
    let parts: Vec<&[u8]> = main.split(|&b| b == b'.').collect();
    if parts.len() > 3 || !parts.iter().all(|p| is_x(Some(p)) || is_numeric_ident(p)) {
        return None;
    }
    // A prerelease or build may only follow a third component.
    if (pre.is_some() || build.is_some()) && parts.len() != 3 {
        return None;
    }
    if pre.is_some_and(|p| !all_dotted(p, is_prerelease_ident))
        || build.is_some_and(|b| !all_dotted(b, is_build_ident))
    {
        return None;
    }
    Some(Partial {
        major: parts[0],
        minor: parts.get(1).copied(),
        patch: parts.get(2).copied(),
        pre,
    })
}

/// npm's `isX`: a missing component, `x`, `X` or `*`.
fn is_x(id: Option<&[u8]>) -> bool {
    matches!(id, None | Some(b"x" | b"X" | b"*"))
}

/// `+n + 1` as JavaScript computes it, as far as validity goes: a result above
/// 2^53-1 is replaced by 2^53, which the comparator parser then refuses, as
/// npm refuses the imprecise number it would print.
fn inc(n: &[u8]) -> String {
    match ascii(n).parse::<u64>() {
        Ok(n) if n < MAX_SAFE_INTEGER => (n + 1).to_string(),
        _ => (MAX_SAFE_INTEGER + 1).to_string(),
    }
}

/// `1.2.3 - 2.3.4` → `>=1.2.3 <=2.3.4`; partial bounds widen (`- 2` → `<3.0.0-0`).
/// Applies only when the whole alternative is a hyphen range.
fn replace_hyphen_range(part: &[u8]) -> Option<Vec<u8>> {
    let mut i = usize::from(part.first() == Some(&b' '));
    let from_start = i;
    while i < part.len() && matches!(part[i], b'v' | b'=' | b' ') {
        i += 1;
    }
    while i < part.len() && part[i] != b' ' {
        i += 1;
    }
    let from_raw = &part[from_start..i];
    let f = partial(from_raw)?;
    let rest = part[i..].strip_prefix(b" - ")?;
    let to_raw = rest.strip_suffix(b" ").unwrap_or(rest);
    let t = partial(to_raw)?;

    let fm = f.minor.unwrap_or_default();
    let from = if is_x(Some(f.major)) {
        String::new()
    } else if is_x(f.minor) {
        format!(">={}.0.0", ascii(f.major))
    } else if is_x(f.patch) {
        format!(">={}.{}.0", ascii(f.major), ascii(fm))
    } else {
        // npm keeps the lower bound's text as written, prefix included.
        format!(">={}", String::from_utf8_lossy(from_raw))
    };
    let (tm, tp) = (t.minor.unwrap_or_default(), t.patch.unwrap_or_default());
    let to = if is_x(Some(t.major)) {
        String::new()
    } else if is_x(t.minor) {
        format!("<{}.0.0-0", inc(t.major))
    } else if is_x(t.patch) {
        format!("<{}.{}.0-0", ascii(t.major), inc(tm))
    } else if let Some(pre) = t.pre {
        format!(
            "<={}.{}.{}-{}",
            ascii(t.major),
            ascii(tm),
            ascii(tp),
            ascii(pre)
        )
    } else {
        format!("<={}", String::from_utf8_lossy(to_raw))
    };
    Some(trim(format!("{from} {to}").as_bytes()).to_vec())
}

/// `^1.2.3` → `>=1.2.3 <2.0.0-0`, `^0.2.3` → `<0.3.0-0`, `^0.0.3` → `<0.0.4-0`.
fn replace_caret(token: &[u8]) -> Vec<u8> {
    let Some(x) = token.strip_prefix(b"^").and_then(partial) else {
        return token.to_vec();
    };
    let (maj, min, pat) = (
        ascii(x.major),
        ascii(x.minor.unwrap_or_default()),
        ascii(x.patch.unwrap_or_default()),
    );
    let lower = match x.pre {
        Some(pre) => format!(">={maj}.{min}.{pat}-{}", ascii(pre)),
        None => format!(">={maj}.{min}.{pat}"),
    };
    let out = if is_x(Some(x.major)) {
        String::new()
    } else if is_x(x.minor) {
        format!(">={maj}.0.0 <{}.0.0-0", inc(x.major))
    } else if is_x(x.patch) {
        if maj == "0" {
            format!(">={maj}.{min}.0 <{maj}.{}.0-0", inc(min.as_bytes()))
        } else {
            format!(">={maj}.{min}.0 <{}.0.0-0", inc(x.major))
        }
    } else if maj == "0" && min == "0" {
        format!("{lower} <{maj}.{min}.{}-0", inc(pat.as_bytes()))
    } else if maj == "0" {
        format!("{lower} <{maj}.{}.0-0", inc(min.as_bytes()))
    } else {
        format!("{lower} <{}.0.0-0", inc(x.major))
    };
    out.into_bytes()
}

/// `~1.2.3` → `>=1.2.3 <1.3.0-0`, `~1` → `>=1.0.0 <2.0.0-0`; `~>` is an alias.
fn replace_tilde(token: &[u8]) -> Vec<u8> {
    let Some(rest) = token.strip_prefix(b"~") else {
        return token.to_vec();
    };
    let Some(x) = partial(rest.strip_prefix(b">").unwrap_or(rest)) else {
        return token.to_vec();
    };
    let (maj, min, pat) = (
        ascii(x.major),
        ascii(x.minor.unwrap_or_default()),
        ascii(x.patch.unwrap_or_default()),
    );
    let out = if is_x(Some(x.major)) {
        String::new()
    } else if is_x(x.minor) {
        format!(">={maj}.0.0 <{}.0.0-0", inc(x.major))
    } else if is_x(x.patch) {
        format!(">={maj}.{min}.0 <{maj}.{}.0-0", inc(min.as_bytes()))
    } else if let Some(pre) = x.pre {
        format!(
            ">={maj}.{min}.{pat}-{} <{maj}.{}.0-0",
            ascii(pre),
            inc(min.as_bytes())
        )
    } else {
        format!(">={maj}.{min}.{pat} <{maj}.{}.0-0", inc(min.as_bytes()))
    };
    out.into_bytes()
}

/// X-ranges with or without an operator: `1.2.x` → `>=1.2.0 <1.3.0-0`,
/// `>1.2` → `>=1.3.0`, `<=1` → `<2.0.0-0`, `<*` → nothing, `*` → any. A token
/// without wildcards is left as written.
fn replace_xrange(token: &[u8]) -> Vec<u8> {
    let token = trim(token);
    let mut op_len = usize::from(matches!(token.first(), Some(b'<' | b'>')));
    if token.get(op_len) == Some(&b'=') {
        op_len += 1;
    }
    let mut gtlt = ascii(&token[..op_len]);
    let body = &token[op_len..];
    let Some(x) = partial(body.strip_prefix(b" ").unwrap_or(body)) else {
        return token.to_vec();
    };
    // npm leaves `1.x.3` and `x.1` as they are (and so invalid).
    if (is_x(Some(x.major)) && !is_x(x.minor)) || (is_x(x.minor) && !is_x(x.patch)) {
        return token.to_vec();
    }
    let xm = is_x(Some(x.major)) || is_x(x.minor);
    let any_x = xm || is_x(x.patch);
    if gtlt == "=" && any_x {
        gtlt = "";
    }
    let out = if is_x(Some(x.major)) {
        if gtlt == ">" || gtlt == "<" {
            "<0.0.0-0".to_string()
        } else {
            "*".to_string()
        }
    } else if !gtlt.is_empty() && any_x {
        let mut major = ascii(x.major).to_string();
        let mut minor = if xm {
            "0".to_string()
        } else {
            ascii(x.minor.unwrap_or_default()).to_string()
        };
        if gtlt == ">" {
            gtlt = ">=";
            if xm {
                major = inc(major.as_bytes());
            } else {
                minor = inc(minor.as_bytes());
            }
        } else if gtlt == "<=" {
            gtlt = "<";
            if xm {
                major = inc(major.as_bytes());
            } else {
                minor = inc(minor.as_bytes());
            }
        }
        let pre = if gtlt == "<" { "-0" } else { "" };
        format!("{gtlt}{major}.{minor}.0{pre}")
    } else if xm {
        format!(">={}.0.0 <{}.0.0-0", ascii(x.major), inc(x.major))
    } else if any_x {
        let minor = x.minor.unwrap_or_default();
        format!(
            ">={}.{}.0 <{}.{}.0-0",
            ascii(x.major),
            ascii(minor),
            ascii(x.major),
            inc(minor)
        )
    } else {
        return token.to_vec();
    };
    out.into_bytes()
}

/// npm deletes the first `[<>]?=?\s?\*` it finds ("any" is the empty comparator).
fn replace_star(s: &[u8]) -> Vec<u8> {
    for start in 0..s.len() {
        let mut i = start;
        if matches!(s[i], b'<' | b'>') {
            i += 1;
        }
        if s.get(i) == Some(&b'=') {
            i += 1;
        }
        if s.get(i) == Some(&b' ') {
            i += 1;
        }
        if s.get(i) == Some(&b'*') {
            let mut out = s[..start].to_vec();
            out.extend_from_slice(&s[i + 1..]);
            return out;
        }
    }
    s.to_vec()
}

/// Build metadata never takes part in range matching; npm removes every
/// `+ident(.ident)*` before anything else.
fn strip_build_metadata(s: &[u8]) -> Vec<u8> {
    let is_id = |i: usize| s.get(i).is_some_and(|&b| is_ident_byte(b));
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'+' && is_id(i + 1) {
            let mut j = i + 1;
            loop {
                while is_id(j) {
                    j += 1;
                }
                if s.get(j) == Some(&b'.') && is_id(j + 1) {
                    j += 1;
                } else {
                    break;
                }
            }
            i = j;
            continue;
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// `~ 1.2` → `~1.2` and `^ 1.2` → `^1.2`. npm's tilde rule also swallows a
/// `>` before the space (`~> 1.2` → `~1.2`).
fn trim_after(s: &[u8], mark: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == mark {
            let mut j = i + 1;
            if mark == b'~' && s.get(j) == Some(&b'>') {
                j += 1;
            }
            if s.get(j) == Some(&b' ') {
                out.push(mark);
                i = j + 1;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// `> 1.2.3 <  2` → `>1.2.3 <2`. This follows npm's hand-written scanner (which
/// replaced a regex) position for position: where a match ends decides where
/// the next one may start, and that decides odd cases such as `1.2.3-v = 4`.
fn trim_comparator_whitespace(s: &[u8]) -> Vec<u8> {
    let at = |i: usize| s.get(i).copied();
    let is_prefix = |b: Option<u8>| matches!(b, Some(b'v' | b'=' | b' '));
    let mut out = Vec::with_capacity(s.len());
    let (mut copy_from, mut cursor) = (0, 0);
    while cursor < s.len() {
        let match_start = cursor;
        if matches!(s[cursor], b'<' | b'>') {
            cursor += 1;
        } else if !is_prefix(at(cursor)) && !is_version_start(at(cursor)) {
            cursor += 1;
            continue;
        }
        while cursor < s.len() && is_prefix(at(cursor)) {
            cursor += 1;
        }
        if !is_version_start(at(cursor)) {
            continue;
        }
        // The one space between an operator and its version.
        let mut p = match_start;
        if at(p) == Some(b' ') {
            p += 1;
        }
        if matches!(at(p), Some(b'<' | b'>')) {
            p += 1;
        }
        if at(p) == Some(b'=') {
            p += 1;
        }
        if at(p) == Some(b' ') {
            out.extend_from_slice(&s[copy_from..p]);
            copy_from = p + 1;
        }
        cursor = scan::version_end(s, cursor);
    }
    out.extend_from_slice(&s[copy_from..]);
    out
}

fn is_version_start(b: Option<u8>) -> bool {
    matches!(b, Some(b'0'..=b'9' | b'x' | b'X' | b'*'))
}

/// Where npm's operator-trimming scanner considers a version to end (its
/// `LOOSEPLAIN | XRANGEPLAIN` alternatives, first match wins).
mod scan {
    use super::{is_ident_byte, MAX_LENGTH, MAX_SAFE_BUILD_LENGTH};

    fn at(s: &[u8], i: usize) -> Option<u8> {
        s.get(i).copied()
    }

    fn digits_end(s: &[u8], start: usize, limit: usize) -> usize {
        let run = s[start.min(s.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        start + run.min(limit)
    }

    fn number_end(s: &[u8], start: usize, loose: bool) -> usize {
        if !loose && at(s, start) == Some(b'0') {
            return start + 1;
        }
        digits_end(s, start, if loose { MAX_LENGTH } else { MAX_LENGTH + 1 })
    }

    fn prerelease_ident_end(s: &[u8], start: usize, loose: bool) -> usize {
        let d = digits_end(s, start, MAX_LENGTH);
        if matches!(at(s, d), Some(b) if b.is_ascii_alphabetic() || b == b'-') {
            let mut end = d + 1;
            let limit = end + MAX_SAFE_BUILD_LENGTH;
            while end < limit && at(s, end).is_some_and(is_ident_byte) {
                end += 1;
            }
            return end;
        }
        number_end(s, start, loose)
    }

    fn prerelease_end(s: &[u8], start: usize, loose: bool) -> usize {
        let hyphen = at(s, start) == Some(b'-');
        if !loose && !hyphen {
            return start;
        }
        let id_start = start + usize::from(hyphen);
        let mut end = prerelease_ident_end(s, id_start, loose);
        if end == id_start {
            if !loose || !hyphen {
                return start;
            }
            end = prerelease_ident_end(s, start, loose);
        }
        while at(s, end) == Some(b'.') {
            let next = prerelease_ident_end(s, end + 1, loose);
            if next == end + 1 {
                break;
            }
            end = next;
        }
        end
    }

    fn build_ident_end(s: &[u8], start: usize) -> usize {
        let mut end = start;
        while end - start < MAX_SAFE_BUILD_LENGTH && at(s, end).is_some_and(is_ident_byte) {
            end += 1;
        }
        end
    }

    fn build_end(s: &[u8], start: usize) -> usize {
        if at(s, start) != Some(b'+') {
            return start;
        }
        let mut end = build_ident_end(s, start + 1);
        if end == start + 1 {
            return start;
        }
        while at(s, end) == Some(b'.') {
            let next = build_ident_end(s, end + 1);
            if next == end + 1 {
                break;
            }
            end = next;
        }
        end
    }

    fn loose_full_end(s: &[u8], start: usize) -> usize {
        let mut end = start;
        for component in 0..3 {
            let next = number_end(s, end, true);
            if next == end {
                return start;
            }
            end = next;
            if component < 2 {
                if at(s, end) != Some(b'.') {
                    return start;
                }
                end += 1;
            }
        }
        build_end(s, prerelease_end(s, end, true))
    }

    fn component_end(s: &[u8], start: usize) -> usize {
        match at(s, start) {
            Some(b'0'..=b'9') => number_end(s, start, false),
            Some(b'x' | b'X' | b'*') => start + 1,
            _ => start,
        }
    }

    fn partial_end(s: &[u8], start: usize) -> usize {
        let mut end = component_end(s, start);
        for _ in 0..2 {
            if at(s, end) != Some(b'.') {
                return end;
            }
            let next = component_end(s, end + 1);
            if next == end + 1 {
                return end;
            }
            end = next;
        }
        build_end(s, prerelease_end(s, end, false))
    }

    pub(super) fn version_end(s: &[u8], start: usize) -> usize {
        let full = loose_full_end(s, start);
        if full != start {
            full
        } else {
            partial_end(s, start)
        }
    }
}

/// npm's `NUMERICIDENTIFIER` (`0|[1-9]\d{0,256}`).
fn is_numeric_ident(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LENGTH + 1
        && s.iter().all(u8::is_ascii_digit)
        && (s.len() == 1 || s[0] != b'0')
}

/// A numeric identifier, or digits then a letter or `-` then more identifier
/// characters (npm's length caps included).
fn is_prerelease_ident(s: &[u8]) -> bool {
    if s.is_empty() || !s.iter().all(|&b| is_ident_byte(b)) {
        return false;
    }
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == s.len() {
        is_numeric_ident(s)
    } else {
        digits <= MAX_LENGTH && s.len() - digits - 1 <= MAX_SAFE_BUILD_LENGTH
    }
}

fn is_build_ident(s: &[u8]) -> bool {
    !s.is_empty() && s.len() <= MAX_SAFE_BUILD_LENGTH && s.iter().all(|&b| is_ident_byte(b))
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn all_dotted(s: &[u8], ident: fn(&[u8]) -> bool) -> bool {
    s.split(|&b| b == b'.').all(ident)
}

fn split_once(s: &[u8], sep: u8) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&b| b == sep) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

/// JavaScript's `s.split(/\s+/)` (after whitespace collapsing, only spaces remain).
fn split_ws(s: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < s.len() {
        if s[i] == b' ' {
            out.push(&s[start..i]);
            while i < s.len() && s[i] == b' ' {
                i += 1;
            }
            start = i;
        } else {
            i += 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().take_while(|&&b| b == b' ').count();
    let end = s.len() - s[start..].iter().rev().take_while(|&&b| b == b' ').count();
    &s[start..end]
}

/// Only ever called on text the grammar has already checked to be ASCII.
fn ascii(s: &[u8]) -> &str {
    std::str::from_utf8(s).unwrap_or("")
}

/// npm collapses runs of JavaScript whitespace (`\s`) to single spaces
/// before it parses a range.
fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.trim_matches(is_js_whitespace).chars() {
        if is_js_whitespace(c) {
            pending_space = true;
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn sat(range: &str, version: &str) -> bool {
        parse(range)
            .unwrap_or_else(|e| panic!("{range:?} should parse: {e}"))
            .satisfies(&v(version))
    }

    /// Each case: a range, versions it must match, versions it must not.
    fn check(cases: &[(&str, &[&str], &[&str])]) {
        for (range, yes, no) in cases {
            for version in *yes {
                assert!(sat(range, version), "{range:?} should match {version}");
            }
            for version in *no {
                assert!(!sat(range, version), "{range:?} should not match {version}");
            }
        }
    }

    #[test]
    fn any_version() {
        check(&[
            ("", &["0.0.0", "1.2.3", "99.0.0"], &["1.0.0-beta"]),
            ("*", &["0.0.0", "1.2.3"], &["1.0.0-beta"]),
            ("x", &["1.2.3"], &[]),
            ("X", &["1.2.3"], &[]),
            ("  \t ", &["1.2.3"], &[]),
            (">=0.0.0", &["0.0.0", "5.0.0"], &[]),
            ("||", &["1.2.3"], &[]),
        ]);
    }

    #[test]
    fn bare_version_is_exact_unlike_cargo() {
        check(&[
            (
                "1.2.3",
                &["1.2.3", "1.2.3+build.7"],
                &["1.2.4", "1.3.0", "1.2.2"],
            ),
            ("=1.2.3", &["1.2.3"], &["1.2.4"]),
            ("v1.2.3", &["1.2.3"], &["1.2.4"]),
            ("=v1.2.3", &["1.2.3"], &["1.2.4"]),
            ("1.2.3+build", &["1.2.3"], &["1.2.4"]),
        ]);
    }

    #[test]
    fn partial_versions_are_x_ranges() {
        check(&[
            ("1", &["1.0.0", "1.9.9"], &["2.0.0", "0.9.9", "2.0.0-0"]),
            ("1.x", &["1.0.0", "1.9.9"], &["2.0.0"]),
            ("1.*", &["1.5.0"], &["2.0.0"]),
            ("1.2", &["1.2.0", "1.2.9"], &["1.3.0", "1.1.9"]),
            ("1.2.x", &["1.2.0", "1.2.9"], &["1.3.0"]),
            ("1.2.*", &["1.2.5"], &["1.3.0"]),
            ("1.x.x", &["1.4.4"], &["2.0.0"]),
        ]);
    }

    #[test]
    fn operators_with_partials() {
        check(&[
            (">1", &["2.0.0"], &["1.9.9"]),
            (">1.2", &["1.3.0"], &["1.2.9"]),
            ("<1.2", &["1.1.9"], &["1.2.0", "1.2.0-beta"]),
            ("<=1.2", &["1.2.9"], &["1.3.0"]),
            ("<=1", &["1.9.9"], &["2.0.0"]),
            (">=1.2", &["1.2.0"], &["1.1.9"]),
            ("=1.2", &["1.2.5"], &["1.3.0"]),
            ("<*", &[], &["0.0.0", "1.0.0"]),
            (">*", &[], &["1.0.0"]),
            (">=*", &["1.0.0"], &[]),
        ]);
    }

    #[test]
    fn comparison_operators_and_whitespace() {
        check(&[
            (">1.2.3", &["1.2.4"], &["1.2.3"]),
            (">=1.2.3", &["1.2.3", "2.0.0"], &["1.2.2"]),
            ("<1.2.3", &["1.2.2"], &["1.2.3"]),
            ("<=1.2.3", &["1.2.3"], &["1.2.4"]),
            (">= 1.2.3", &["1.2.3"], &["1.2.2"]),
            ("<   1.2.3", &["1.2.2"], &["1.2.3"]),
            (">=\t1.2.3\n<2", &["1.5.0"], &["2.0.0"]),
            ("\u{a0}1.2.3\u{3000}", &["1.2.3"], &["1.2.4"]),
        ]);
    }

    #[test]
    fn tilde() {
        check(&[
            ("~1.2.3", &["1.2.3", "1.2.9"], &["1.3.0", "1.2.2"]),
            ("~1.2", &["1.2.0", "1.2.9"], &["1.3.0"]),
            ("~1", &["1.0.0", "1.9.0"], &["2.0.0"]),
            ("~0.2.3", &["0.2.3", "0.2.9"], &["0.3.0"]),
            ("~0.0.3", &["0.0.3", "0.0.9"], &["0.1.0"]),
            ("~>1.2", &["1.2.5"], &["1.3.0"]),
            ("~> 1.2.3", &["1.2.5"], &["1.3.0"]),
            ("~ 1.2.3", &["1.2.5"], &["1.3.0"]),
            ("~1.x", &["1.5.0"], &["2.0.0"]),
            ("~*", &["3.0.0"], &[]),
            (
                "~1.2.3-beta.2",
                &["1.2.3-beta.2", "1.2.3-beta.10", "1.2.3", "1.2.8"],
                &["1.2.3-beta.1", "1.2.4-beta.3"],
            ),
        ]);
    }

    #[test]
    fn caret() {
        check(&[
            (
                "^1.2.3",
                &["1.2.3", "1.9.9"],
                &["2.0.0", "1.2.2", "2.0.0-alpha"],
            ),
            ("^1.2", &["1.2.0", "1.9.0"], &["2.0.0", "1.1.0"]),
            ("^1", &["1.0.0"], &["2.0.0"]),
            ("^1.x", &["1.0.0", "1.9.0"], &["2.0.0"]),
            ("^0.2.3", &["0.2.3", "0.2.9"], &["0.3.0", "0.2.2"]),
            ("^0.2", &["0.2.0"], &["0.3.0"]),
            ("^0.0.3", &["0.0.3"], &["0.0.4", "0.0.2"]),
            ("^0.0", &["0.0.0", "0.0.9"], &["0.1.0"]),
            ("^0.x", &["0.9.0"], &["1.0.0"]),
            ("^0", &["0.9.0"], &["1.0.0"]),
            ("^ 1.2.3", &["1.3.0"], &["2.0.0"]),
            ("^v1.2.3", &["1.3.0"], &["2.0.0"]),
            (
                "^1.2.3-beta.2",
                &["1.2.3-beta.2", "1.2.3", "1.5.0"],
                &["1.2.3-beta.1", "1.2.4-beta"],
            ),
            ("^0.0.3-beta", &["0.0.3-beta", "0.0.3"], &["0.0.4"]),
        ]);
    }

    #[test]
    fn hyphen_ranges() {
        check(&[
            ("1.2.3 - 2.3.4", &["1.2.3", "2.3.4"], &["1.2.2", "2.3.5"]),
            ("1.2 - 2.3.4", &["1.2.0"], &["1.1.9"]),
            ("1.2.3 - 2.3", &["2.3.9"], &["2.4.0"]),
            ("1.2.3 - 2", &["2.9.9"], &["3.0.0", "3.0.0-0"]),
            ("1 - 2", &["1.0.0", "2.9.9"], &["3.0.0"]),
            ("* - 2", &["0.0.0"], &["3.0.0"]),
            ("1.2.3 - *", &["99.0.0"], &["1.2.2"]),
            ("v1.2.3 - v2.3.4", &["2.0.0"], &["2.3.5"]),
            (
                "1.2.3-beta - 2.3.4-rc.1",
                &["1.2.3-beta.1", "2.3.4-rc.1", "2.0.0"],
                &["2.3.4", "2.0.0-beta"],
            ),
        ]);
    }

    #[test]
    fn alternatives_and_intersections() {
        check(&[
            (">=1.2.3 <2.0.0", &["1.2.3", "1.9.9"], &["2.0.0", "1.2.2"]),
            (
                "1.2.7 || >=1.2.9 <2.0.0",
                &["1.2.7", "1.2.9", "1.4.6"],
                &["1.2.8", "2.0.0"],
            ),
            ("^1.2.3 || ^2", &["1.5.0", "2.5.0"], &["3.0.0"]),
            (">=2 <1", &[], &["1.5.0", "2.0.0"]),
            ("<0.0.0-0", &[], &["0.0.0"]),
            ("<0.0.0-0 || 1.2.3", &["1.2.3"], &["1.2.4"]),
            ("1.2.3 ||", &["9.9.9"], &[]),
        ]);
    }

    #[test]
    fn prerelease_rule() {
        check(&[
            // A prerelease needs a comparator naming a prerelease of the same tuple.
            (
                ">=1.2.3-alpha.1 <1.2.4",
                &["1.2.3-alpha.2", "1.2.3"],
                &["1.2.4-alpha"],
            ),
            (">1.0.0", &[], &["1.0.1-beta"]),
            ("1.2.3-alpha", &["1.2.3-alpha"], &["1.2.3-alpha.1", "1.2.3"]),
            // The prerelease comparator must be in the same alternative...
            (
                ">=1.0.0-beta <1.0.0 || 2.x",
                &["1.0.0-rc.1"],
                &["2.0.0-rc.1"],
            ),
            // ...and an alternative that is just `*` wins and matches no prerelease.
            (">=1.0.0-beta <1.0.0 || *", &["1.0.0"], &["1.0.0-rc.1"]),
        ]);
    }

    #[test]
    fn invalid_ranges() {
        for bad in [
            "a",
            "latest",
            "1.2.3.4",
            "1.2.",
            "01.2.3",
            "1.02.3",
            "1.2.3-01",
            "vv1.2.3",
            "==1.2.3",
            "1.x.3",
            "x.1",
            "1.x.99999999999999999999999",
            "1.2.3 | 2",
            ">",
            "~",
            "^",
            "!1.2.3",
            "> = 1.2.3",
            "1.2.3 -2.3.4",
            "=1.2.3 - 2",
            "9007199254740992.0.0",
            "^9007199254740991",
            "1.2.3 >",
            "V1.2.3",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn npm_quirks_that_are_valid() {
        check(&[
            // npm's `[v=\s]*` prefix inside x-ranges and operator trimming.
            ("<  =1.2.3", &["1.2.3"], &["1.2.4"]),
            ("==1.2", &["1.2.5"], &["1.3.0"]),
            ("1.2.3*", &["1.2.3"], &["1.2.4"]),
            ("1.2+build", &["1.2.7"], &["1.3.0"]),
            ("1.2.x-beta", &["1.2.0"], &["1.3.0"]),
            ("^1.x.3", &["1.0.0"], &["2.0.0"]),
            ("^9007199254740990", &["9007199254740990.1.0"], &[]),
            ("~1.x.99999999999999999999999", &["1.5.0"], &["2.0.0"]),
        ]);
        // Where one match of the operator-trimming scanner ends decides the next:
        // the `v` inside `-v` is not taken as the prefix of `v = 4`.
        assert!(parse("1.2.3-v = 4").is_ok());
    }

    #[test]
    fn error_message_names_the_comparator() {
        let err = parse(">=1.2.3 banana").unwrap_err();
        assert!(err.contains("banana"), "{err}");
    }

    // ---- differential test against npm's own `semver` package ----

    /// What node-semver said about thousands of ranges (hand-written ones,
    /// random glue of grammar fragments, and random well-formed ranges),
    /// written by scripts/gen-semver-table.mjs from the real package.
    const NPM_TABLE: &str = include_str!("../tests/data/npm-semver-table.jsonl");

    #[test]
    fn agrees_with_the_npm_semver_table() {
        use crate::json::{self, Value};

        let mut lines = NPM_TABLE.lines();
        let header = json::parse(lines.next().unwrap()).unwrap();
        let Some(Value::Array(versions)) = header.get("versions") else {
            panic!("table header without versions");
        };
        let versions: Vec<Version> = versions
            .iter()
            .map(|x| match x {
                Value::String(s) => v(s),
                other => panic!("version {other:?}"),
            })
            .collect();
        let (mut rows, mut valid, mut mismatches) = (0, 0, Vec::new());
        for line in lines {
            let row = json::parse(line).unwrap();
            let Value::Array(row) = &row else {
                panic!("row {line}")
            };
            let [Value::String(range), Value::Bool(npm_valid), Value::String(bits)] = &row[..]
            else {
                panic!("row {line}")
            };
            rows += 1;
            let ours = parse(range);
            if ours.is_ok() != *npm_valid {
                mismatches.push(format!("{range:?}: npm valid={npm_valid}, ours={ours:?}"));
                continue;
            }
            valid += usize::from(*npm_valid);
            for (version, bit) in versions.iter().zip(bits.chars()) {
                let npm = bit == '1';
                let ours = ours.as_ref().is_ok_and(|r| r.satisfies(version));
                if ours != npm {
                    mismatches.push(format!("{range:?} {version}: npm={npm} ours={ours}"));
                }
            }
        }
        assert!(rows > 4000 && valid > 1000, "{rows} rows, {valid} valid");
        assert!(
            mismatches.is_empty(),
            "{} disagreements with npm:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
    }
}

/// Property tests. Agreement with npm is the table test above; these check
/// that no input panics and that the grammar's combinators mean what npm
/// says they mean (`||` is "either" unless one side is "any version", a
/// space is "both" for releases, a
/// plain comparator compares by precedence).
#[cfg(test)]
mod props {
    use super::*;
    use crate::testing::config;
    use proptest::prelude::*;

    fn version() -> impl Strategy<Value = Version> {
        let pre =
            prop::sample::select(vec!["", "", "-0", "-alpha", "-alpha.1", "-beta.2", "-rc.1"]);
        (0u64..4, 0u64..4, 0u64..4, pre)
            .prop_map(|(a, b, c, pre)| Version::parse(&format!("{a}.{b}.{c}{pre}")).unwrap())
    }

    fn release() -> impl Strategy<Value = Version> {
        (0u64..4, 0u64..4, 0u64..4).prop_map(|(a, b, c)| Version::new(a, b, c))
    }

    /// One comparator set of npm's grammar: partial versions, x-ranges,
    /// operators, `^`, `~`, hyphen ranges, odd spacing.
    fn set() -> impl Strategy<Value = String> {
        let number = prop::sample::select(vec!["0", "1", "2", "3", "x", "*", "X"]);
        let partial = (
            prop::sample::select(vec!["", "", "v", "="]),
            prop::collection::vec(number, 1..4),
            prop::sample::select(vec!["", "", "-0", "-alpha", "-beta.2"]),
        )
            .prop_map(|(prefix, parts, pre)| {
                let pre = if parts.len() == 3 { pre } else { "" };
                format!("{prefix}{}{pre}", parts.join("."))
            });
        let op = prop::sample::select(vec!["", "", ">", ">=", "<", "<=", "=", "^", "~", "~>"]);
        let space = prop::sample::select(vec!["", " ", "  ", "\t"]);
        let comparator = (op, space, partial.clone()).prop_map(|(o, s, p)| format!("{o}{s}{p}"));
        prop_oneof![
            4 => prop::collection::vec(comparator, 1..4).prop_map(|c| c.join(" ")),
            1 => (partial.clone(), partial).prop_map(|(a, b)| format!("{a} - {b}")),
        ]
    }

    fn sat(range: &str, v: &Version) -> Option<bool> {
        parse(range).ok().map(|r| r.satisfies(v))
    }

    proptest! {
        #![proptest_config(config(1024))]

        #[test]
        fn any_text_is_a_range_or_refused_without_panicking(
            s in prop_oneof![
                any::<String>(),
                prop::collection::vec(
                    prop::sample::select(vec![
                        "1", "0", ".", "x", "*", "-", " ", "^", "~", ">", "<", "=", "v", "||",
                        "-rc.1", "+b", " - ", "9007199254740992", "\u{a0}", "99999999999999999999",
                    ]),
                    0..16,
                ).prop_map(|p| p.concat()),
            ],
            v in version(),
        ) {
            if let Ok(range) = parse(&s) {
                let _ = range.satisfies(&v);
            }
        }

        #[test]
        fn an_alternative_holds_when_either_side_holds(
            a in set(),
            b in set(),
            sep in prop::sample::select(vec!["||", " || ", "  ||\t"]),
            v in version(),
        ) {
            let either = format!("{a}{sep}{b}");
            let any = parse("*").unwrap();
            let is_any = |s: &str| parse(s).is_ok_and(|r| r == any);
            match (sat(&a, &v), sat(&b, &v)) {
                // npm's quirk: an alternative that is "any version" makes the
                // whole range "any version", which excludes prereleases
                // (`^0.0.1-0 || *` does not match 0.0.1-0).
                (Some(_), Some(_)) if is_any(&a) || is_any(&b) => {
                    prop_assert_eq!(sat(&either, &v), sat("*", &v), "{}", either)
                }
                (Some(x), Some(y)) => prop_assert_eq!(sat(&either, &v), Some(x || y), "{}", either),
                _ => prop_assert_eq!(sat(&either, &v), None, "{}", either),
            }
        }

        #[test]
        fn a_space_means_both_for_releases(
            a in prop::sample::select(vec![">", ">=", "<", "<=", "=", "^", "~", ""]),
            x in release(),
            b in prop::sample::select(vec![">", ">=", "<", "<=", "=", "^", "~", ""]),
            y in release(),
            v in release(),
        ) {
            let (left, right) = (format!("{a}{x}"), format!("{b}{y}"));
            let both = format!("{left} {right}");
            prop_assert_eq!(
                sat(&both, &v),
                Some(sat(&left, &v).unwrap() && sat(&right, &v).unwrap()),
                "{} against {}", both, v
            );
        }

        #[test]
        fn plain_comparators_compare_releases_by_precedence(
            op in prop::sample::select(vec![">", ">=", "<", "<=", "=", ""]),
            x in release(),
            v in release(),
        ) {
            let want = match op {
                ">" => v > x,
                ">=" => v >= x,
                "<" => v < x,
                "<=" => v <= x,
                _ => v == x,
            };
            prop_assert_eq!(sat(&format!("{op}{x}"), &v), Some(want));
        }
    }
}
