//! Behaviours of JavaScript that the spec inherits from its reference
//! implementation and loopx reproduces where users can see them.

/// What JavaScript's `trim`/`trimEnd` strip and what its regex `\\s`
/// matches (ECMAScript WhiteSpace and LineTerminator). Env-file values are
/// "trimmed of trailing whitespace" (§8.1) in this sense, and npm collapses
/// these characters in version ranges (§3.2). Unlike Rust's
/// `char::is_whitespace`, this includes U+FEFF and excludes U+0085.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_whitespace_is_ecmascript_not_unicode_white_space() {
        for c in ['\t', ' ', '\u{a0}', '\u{2028}', '\u{3000}', '\u{feff}'] {
            assert!(is_js_whitespace(c), "{c:?}");
        }
        for c in ['\u{85}', 'a', '\u{200b}', '\u{180e}'] {
            assert!(!is_js_whitespace(c), "{c:?}");
        }
    }
}
