//! Secrets in install sources never reach a message (DESIGN "Beyond the
//! spec"). People install from `https://user:TOKEN@host/…` and from signed
//! URLs (`…?X-Amz-Signature=…`, `?token=…`); loopx hands those to git and
//! curl as given, but every message that shows a URL shows it through here:
//! userinfo, query and fragment become `***`. The rest (scheme, host, port,
//! path) stays, so the message still says which source failed.
//!
//! git's scp-like form (`git@host:org/repo.git`) has no password or query,
//! so it is shown as written.

/// What stands in for a removed secret.
const HIDDEN: &str = "***";

/// `s` with the userinfo, query and fragment of a `scheme://` URL replaced
/// by `***`. Anything that is not such a URL is returned unchanged.
pub fn url(s: &str) -> String {
    let Some(sep) = s.find("://") else {
        return s.to_string();
    };
    let (scheme, rest) = (&s[..sep + 3], &s[sep + 3..]);
    // The authority ends at the first `/`, `?` or `#`.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    let mut out = String::with_capacity(s.len());
    out.push_str(scheme);
    match authority.rfind('@') {
        Some(at) => {
            out.push_str(HIDDEN);
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    // The path runs to the query or the fragment; both go entirely.
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    out.push_str(&rest[..end]);
    let rest = &rest[end..];
    if let Some(query) = rest.strip_prefix('?') {
        let query_end = query.find('#').unwrap_or(query.len());
        if query_end > 0 {
            out.push('?');
            out.push_str(HIDDEN);
        }
        if query_end < query.len() {
            out.push('#');
            out.push_str(HIDDEN);
        }
    } else if rest.starts_with('#') && rest.len() > 1 {
        out.push('#');
        out.push_str(HIDDEN);
    }
    out
}

/// `text` (another tool's message: git's or curl's stderr) with every
/// `scheme://` URL in it passed through `url`. A URL ends at whitespace, a
/// quote or an angle bracket, which is how git and curl delimit them.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(sep) = rest.find("://") {
        // The scheme: the letters, digits, `+`, `-` and `.` just before.
        let start = rest[..sep]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[sep..]
            .find(|c: char| c.is_whitespace() || c.is_control() || "'\"`<>".contains(c))
            .map_or(rest.len(), |i| sep + i);
        out.push_str(&rest[..start]);
        out.push_str(&url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_query_and_fragment_are_hidden() {
        let cases = [
            (
                "http://user:s3cret@127.0.0.1:8080/missing.tar.gz?token=abc",
                "http://***@127.0.0.1:8080/missing.tar.gz?***",
            ),
            (
                "https://ghp_abc@github.com/org/repo.git",
                "https://***@github.com/org/repo.git",
            ),
            // An `@` in the password: the host is after the last one.
            ("https://u:p@ss@h/x.tgz", "https://***@h/x.tgz"),
            ("https://h/x.tgz?a=1#frag", "https://h/x.tgz?***#***"),
            ("https://h/x.git#frag", "https://h/x.git#***"),
            ("https://u:p@h?q", "https://***@h?***"),
            ("https://u:p@h#f", "https://***@h#***"),
            // Nothing secret: unchanged.
            (
                "https://example.com/flow.tgz",
                "https://example.com/flow.tgz",
            ),
            ("https://h/x.tgz?", "https://h/x.tgz"),
            ("file:///tmp/repo.git", "file:///tmp/repo.git"),
            ("http://[::1]:8080/x.git", "http://[::1]:8080/x.git"),
            // Not a `scheme://` URL: shown as written.
            ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
            ("org/repo", "org/repo"),
            ("", ""),
        ];
        for (input, shown) in cases {
            assert_eq!(url(input), shown, "{input}");
        }
    }

    #[test]
    fn urls_inside_messages_are_redacted_and_the_rest_kept() {
        assert_eq!(
            text(
                "fatal: unable to access 'https://me:s3cret@h/r.git/': \
                 The requested URL returned error: 403"
            ),
            "fatal: unable to access 'https://***@h/r.git/': \
             The requested URL returned error: 403"
        );
        assert_eq!(
            text("see http://a:b@x/y?t=1 and \"git+ssh://k@z/q\"\nnext https://ok/p"),
            "see http://***@x/y?*** and \"git+ssh://***@z/q\"\nnext https://ok/p"
        );
        assert_eq!(text("no urls: a://"), "no urls: a://");
        assert_eq!(text("://u:p@h?x"), "://***@h?***");
        assert_eq!(text("plain"), "plain");
    }

    #[test]
    fn the_secret_never_survives() {
        for input in [
            "https://user:SECRET@h/p?SECRET",
            "x https://SECRET@h#SECRET y",
            "a:'http://SECRET:SECRET@h:1/p'?",
            "git clone 'https://SECRET@h/r.git?SECRET=SECRET#SECRET'",
        ] {
            let shown = text(input);
            assert!(!shown.contains("SECRET"), "{input} -> {shown}");
        }
    }
}
