//! Source detection for `loopx install` (§10.1) and the names derived from a
//! source (§10.2).
//!
//! Decisions the spec leaves open, taken here:
//! - URLs are `scheme://authority/path?query#fragment`, split by hand. Every
//!   rule looks at the path only: the query and fragment never make a source a
//!   git or tarball source (`https://h/dl?f=x.git` is neither), as §10.1 says
//!   explicitly for tarballs.
//! - The URL handed to `git clone` or `curl` is the input exactly as given
//!   (§10.2): `url.<base>.insteadOf` rewrites and credential helpers are
//!   keyed on the URL people write, and signed download URLs need their
//!   query. Only classification and naming normalise (a trailing slash, the
//!   query and fragment are not part of the name). The `org/repo` shorthand
//!   is the one source loopx spells out itself.
//! - Besides `scheme://` URLs, git's scp-like form `[user@]host:path` is
//!   accepted for git sources (`git@github.com:org/repo.git`), with the same
//!   rules applied to `host` and `path`.
//! - Schemes: git sources accept http, https, ssh, git, file, git+ssh and
//!   ssh+git (no `ext::` or other transports that run commands); tarballs
//!   accept http, https and file.
//! - Names: the last path segment, with percent-encoded *unreserved*
//!   characters decoded (RFC 3986 §2.3 calls `my%2Dflow` and `my-flow` the same
//!   URL), everything else left as written, so `my%20flow` stays an invalid
//!   name rather than becoming a name with a space. The extension checks
//!   (`.git`, `.tar.gz`, `.tgz`) are case-sensitive, as written in §10.1.
//! - A derived name may be empty or invalid (`https://h/.tgz`); that is not an
//!   error here because multi-workflow sources never use it (§10.2): §10.4
//!   validation reports it for single-workflow sources.
//! - Errors show the source through `redact::url`: no credentials, query
//!   or fragment.

use crate::install::redact;

/// Where a workflow comes from, as classified by §10.1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Cloned with `git clone --depth 1`; `repo_name` names a single-workflow source.
    Git { url: String, repo_name: String },
    /// Downloaded and extracted; `archive_name` names a single-workflow source.
    Tarball { url: String, archive_name: String },
}

/// §10.1's hosts whose `/<owner>/<repo>` URLs are git repositories.
const KNOWN_GIT_HOSTS: [&str; 3] = ["github.com", "gitlab.com", "bitbucket.org"];
const GIT_SCHEMES: [&str; 7] = ["http", "https", "ssh", "git", "file", "git+ssh", "ssh+git"];
const TARBALL_SCHEMES: [&str; 3] = ["http", "https", "file"];

/// Classifies an install source by the rules of §10.1, in order.
pub fn classify(input: &str) -> Result<Source, String> {
    if input.is_empty() {
        return Err("the install source is empty".to_string());
    }
    if input.chars().any(char::is_control) {
        return Err(format!(
            "invalid source {:?}: it contains control characters",
            redact::url(input)
        ));
    }
    if let Some(url) = split_url(input) {
        return classify_url(input, &url);
    }
    // Rule 1: `org/repo` (no scheme, exactly one slash).
    if let Some((org, repo)) = input.split_once('/') {
        if is_shorthand_segment(org) && is_shorthand_segment(repo) {
            if repo.ends_with(".git") {
                return Err(format!(
                    "invalid source {input:?}: the org/repo shorthand must not end in \".git\"; \
                     to install from a .git URL, give the full URL \
                     (https://github.com/{input})"
                ));
            }
            return Ok(Source::Git {
                url: format!("https://github.com/{org}/{repo}.git"),
                repo_name: repo.to_string(),
            });
        }
    }
    if let Some((host, path)) = split_scp(input) {
        if is_repo_path(&host, &path) || path.ends_with(".git") {
            return Ok(Source::Git {
                url: input.to_string(),
                repo_name: repo_name(&path),
            });
        }
    }
    Err(unsupported(input))
}

fn classify_url(input: &str, url: &Url<'_>) -> Result<Source, String> {
    let scheme = url.scheme.to_ascii_lowercase();
    let git_scheme = || {
        if GIT_SCHEMES.contains(&scheme.as_str()) {
            Ok(())
        } else {
            Err(format!(
                "unsupported source {:?}: git sources must use one of the schemes {}",
                redact::url(input),
                GIT_SCHEMES.join(", ")
            ))
        }
    };
    // Rule 2: an `/<owner>/<repo>` URL on a known git host.
    if is_repo_path(&url.host, url.path) || url.path.ends_with(".git") {
        // Rule 2 (an `/<owner>/<repo>` URL on a known git host) or rule 3
        // (any other URL ending in `.git`).
        git_scheme()?;
        return Ok(Source::Git {
            url: input.to_string(),
            repo_name: repo_name(url.path),
        });
    }
    // Rule 4: a tarball, by the path alone.
    let last = last_segment(url.path);
    if let Some(stem) = last
        .strip_suffix(".tar.gz")
        .or_else(|| last.strip_suffix(".tgz"))
    {
        if !TARBALL_SCHEMES.contains(&scheme.as_str()) {
            return Err(format!(
                "unsupported source {:?}: tarball URLs must use one of the schemes {}",
                redact::url(input),
                TARBALL_SCHEMES.join(", ")
            ));
        }
        return Ok(Source::Tarball {
            url: input.to_string(),
            archive_name: decode_unreserved(stem),
        });
    }
    // Rule 5.
    Err(unsupported(input))
}

fn unsupported(input: &str) -> String {
    let mut msg = format!(
        "unsupported source {:?}: expected org/repo (a GitHub repository), a git URL \
         (a github.com, gitlab.com or bitbucket.org repository URL, or any URL ending in .git) \
         or a tarball URL ending in .tar.gz or .tgz; single-file URLs are not supported, \
         scripts must be part of a workflow",
        redact::url(input)
    );
    if looks_like_local_path(input) {
        // §10.1 rule 5 refuses paths; what people mean by one has a URL.
        msg.push_str(&format!(
            ". A local git repository (a directory ending in .git) or archive installs \
             through a file:// URL: loopx install \"file://$(realpath {input})\""
        ));
    }
    msg
}

/// `./dir`, `../flows.tgz`, `/abs/repo.git`, `~/flows`: a filesystem path.
fn looks_like_local_path(input: &str) -> bool {
    input.starts_with('/')
        || input.starts_with("./")
        || input.starts_with("../")
        || input.starts_with("~/")
        || matches!(input, "." | ".." | "~")
}

/// A segment of the `org/repo` shorthand: GitHub's owner and repository
/// characters. Anything else (`./dir`, `host:path/x`) is not shorthand.
fn is_shorthand_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Rule 2's path test: a known host and exactly `/<owner>/<repo>` or
/// `/<owner>/<repo>.git`, optionally with one trailing slash.
fn is_repo_path(host: &str, path: &str) -> bool {
    if !KNOWN_GIT_HOSTS.contains(&host) {
        return false;
    }
    let path = path.strip_suffix('/').unwrap_or(path);
    let mut segments = path.split('/');
    matches!(
        (segments.next(), segments.next(), segments.next(), segments.next()),
        (Some(""), Some(owner), Some(repo), None) if !owner.is_empty() && !repo.is_empty()
    )
}

/// §10.2: the last path segment, minus `.git`.
fn repo_name(path: &str) -> String {
    let last = last_segment(path.strip_suffix('/').unwrap_or(path));
    decode_unreserved(last.strip_suffix(".git").unwrap_or(last))
}

fn last_segment(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Decodes `%XX` only where it stands for an unreserved character
/// (`A-Z a-z 0-9 - . _ ~`), the one decoding that never changes a URL.
fn decode_unreserved(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let decoded = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
            if let Some(b) = decoded {
                out.push(char::from(b));
                i += 3;
                continue;
            }
        }
        let len = s[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&s[i..i + len]);
        i += len;
    }
    out
}

/// The parts of a `scheme://authority/path?query#fragment` URL this module needs.
#[derive(Debug, PartialEq, Eq)]
struct Url<'a> {
    scheme: &'a str,
    authority: &'a str,
    /// Lowercased, without userinfo or port; IPv6 literals keep their brackets.
    host: String,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

/// Splits `s` when it starts with `scheme://`; `None` means "not a URL".
fn split_url(s: &str) -> Option<Url<'_>> {
    let (scheme, rest) = s.split_once("://")?;
    let mut chars = scheme.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(f)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    Some(Url {
        scheme,
        authority,
        host: host_of(authority),
        path,
        query,
        fragment,
    })
}

/// The host of an authority `[userinfo@]host[:port]`, lowercased.
fn host_of(authority: &str) -> String {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host_port.starts_with('[') {
        host_port.find(']').map_or(host_port, |i| &host_port[..=i])
    } else {
        host_port.split(':').next().unwrap_or(host_port)
    };
    host.to_ascii_lowercase()
}

/// git's scp-like syntax `[user@]host:path`: a colon before any slash.
/// Returns the lowercased host and the path with a leading `/`. `a::b` is
/// git's `<transport>::<address>` syntax (`ext::` runs commands), never scp.
fn split_scp(s: &str) -> Option<(String, String)> {
    let colon = s.find(':')?;
    if s[..colon].contains('/') || s[colon + 1..].starts_with(':') {
        return None;
    }
    let host = s[..colon].rsplit_once('@').map_or(&s[..colon], |(_, h)| h);
    if host.is_empty() || host.starts_with('-') {
        return None;
    }
    let path = &s[colon + 1..];
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    Some((host.to_ascii_lowercase(), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(url: &str, name: &str) -> Result<Source, String> {
        Ok(Source::Git {
            url: url.to_string(),
            repo_name: name.to_string(),
        })
    }

    fn tarball(url: &str, name: &str) -> Result<Source, String> {
        Ok(Source::Tarball {
            url: url.to_string(),
            archive_name: name.to_string(),
        })
    }

    #[test]
    fn shorthand_expands_to_github() {
        assert_eq!(
            classify("myorg/my-agent-workflow"),
            git(
                "https://github.com/myorg/my-agent-workflow.git",
                "my-agent-workflow"
            )
        );
        assert_eq!(
            classify("a_b/c.d"),
            git("https://github.com/a_b/c.d.git", "c.d")
        );
    }

    #[test]
    fn shorthand_ending_in_git_is_rejected_with_the_full_url_hint() {
        let err = classify("org/repo.git").unwrap_err();
        assert!(err.contains("shorthand"), "{err}");
        assert!(err.contains("https://github.com/org/repo.git"), "{err}");
    }

    #[test]
    fn local_paths_are_refused_with_a_file_url_hint() {
        for input in ["./dir", "/abs/path/repo.git", "../flows.tgz", "."] {
            let err = classify(input).unwrap_err();
            assert!(
                err.contains(&format!("loopx install \"file://$(realpath {input})\"")),
                "{err}"
            );
        }
        assert!(!classify("repo").unwrap_err().contains("file://"));
    }

    #[test]
    fn not_shorthand() {
        for input in [
            "org/repo/extra",
            "./repo",
            "../repo",
            "org/",
            "/repo",
            "repo",
            "a b/c",
        ] {
            assert!(classify(input).is_err(), "{input:?} should be rejected");
        }
    }

    #[test]
    fn known_hosts_owner_repo_urls_are_git() {
        let cases = [
            (
                "https://github.com/org/repo",
                "https://github.com/org/repo",
                "repo",
            ),
            (
                "https://github.com/org/repo.git",
                "https://github.com/org/repo.git",
                "repo",
            ),
            // Classification normalises; git gets the input as written.
            (
                "https://github.com/org/repo/",
                "https://github.com/org/repo/",
                "repo",
            ),
            (
                "https://github.com/org/repo.git/",
                "https://github.com/org/repo.git/",
                "repo",
            ),
            (
                "https://gitlab.com/group/proj",
                "https://gitlab.com/group/proj",
                "proj",
            ),
            (
                "https://bitbucket.org/team/repo",
                "https://bitbucket.org/team/repo",
                "repo",
            ),
            (
                "http://GitHub.COM/org/repo",
                "http://GitHub.COM/org/repo",
                "repo",
            ),
            (
                "https://github.com:443/org/repo",
                "https://github.com:443/org/repo",
                "repo",
            ),
            (
                "https://me:tok@github.com/org/repo",
                "https://me:tok@github.com/org/repo",
                "repo",
            ),
            // Query and fragment are ignored for detection and naming only.
            (
                "https://github.com/org/repo?tab=readme",
                "https://github.com/org/repo?tab=readme",
                "repo",
            ),
            (
                "https://github.com/org/repo#readme",
                "https://github.com/org/repo#readme",
                "repo",
            ),
            (
                "ssh://git@github.com/org/repo",
                "ssh://git@github.com/org/repo",
                "repo",
            ),
        ];
        for (input, url, name) in cases {
            assert_eq!(classify(input), git(url, name), "{input}");
        }
    }

    #[test]
    fn hostname_match_is_exact() {
        // Not GitHub: these fall through to the later rules and are rejected.
        for input in [
            "https://github.com.evil.org/org/repo",
            "https://evilgithub.com/org/repo",
            "https://github.com@evil.org/org/repo",
            "https://www.github.com/org/repo",
        ] {
            assert!(classify(input).is_err(), "{input} should be rejected");
        }
        // Userinfo that looks like a host does not change the host.
        assert_eq!(
            classify("https://evil.org@github.com/org/repo"),
            git("https://evil.org@github.com/org/repo", "repo")
        );
    }

    #[test]
    fn other_paths_on_known_hosts_continue_to_later_rules() {
        assert_eq!(
            classify("https://github.com/org/repo/archive/refs/tags/v1.2.tar.gz"),
            tarball(
                "https://github.com/org/repo/archive/refs/tags/v1.2.tar.gz",
                "v1.2"
            )
        );
        for input in [
            "https://github.com/org/repo/tree/main",
            "https://github.com/org/repo/blob/main/index.sh",
            "https://github.com/org",
            "https://github.com//repo",
        ] {
            assert!(classify(input).is_err(), "{input} should be rejected");
        }
        assert_eq!(
            classify("https://gitlab.com/group/sub/proj.git"),
            git("https://gitlab.com/group/sub/proj.git", "proj")
        );
    }

    #[test]
    fn dot_git_urls_are_git() {
        assert_eq!(
            classify("file:///tmp/fixtures/repo.git"),
            git("file:///tmp/fixtures/repo.git", "repo")
        );
        assert_eq!(
            classify("https://git.example.com/team/flow.git"),
            git("https://git.example.com/team/flow.git", "flow")
        );
        assert_eq!(
            classify("https://git.example.com/team/flow.git?x=1#y"),
            git("https://git.example.com/team/flow.git?x=1#y", "flow")
        );
        assert_eq!(
            classify("git://example.com/flow.git"),
            git("git://example.com/flow.git", "flow")
        );
        // `.git` must end the path, not the query.
        assert!(classify("https://example.com/download?file=flow.git").is_err());
    }

    #[test]
    fn scp_like_git_urls() {
        assert_eq!(
            classify("git@github.com:org/repo.git"),
            git("git@github.com:org/repo.git", "repo")
        );
        assert_eq!(
            classify("git@github.com:org/repo"),
            git("git@github.com:org/repo", "repo")
        );
        assert_eq!(
            classify("example.com:path/to/flow.git"),
            git("example.com:path/to/flow.git", "flow")
        );
        assert!(classify("example.com:path/to/flow").is_err());
        assert!(classify("-oProxyCommand=x:flow.git").is_err());
        assert!(classify("ext::sh -c touch% /tmp/pwned.git").is_err());
        assert!(classify("fd::17/flow.git").is_err());
    }

    #[test]
    fn tarballs_by_path_ignoring_query_and_fragment() {
        let cases = [
            ("https://example.com/flows/ralph.tar.gz", "ralph"),
            ("https://example.com/ralph.tgz", "ralph"),
            (
                "http://127.0.0.1:8080/dl/my-flow.tar.gz?token=abc#frag",
                "my-flow",
            ),
            ("https://example.com/my%2Dflow.tgz", "my-flow"),
            ("https://example.com/my%20flow.tgz", "my%20flow"),
            ("https://example.com/v1.0.tar.gz", "v1.0"),
            ("file:///tmp/x/flow.tar.gz", "flow"),
            ("https://example.com/.tgz", ""),
        ];
        for (input, name) in cases {
            // The URL itself is kept as given (signed URLs need their query).
            assert_eq!(classify(input), tarball(input, name), "{input}");
        }
    }

    #[test]
    fn other_urls_are_rejected_with_what_is_supported() {
        for input in [
            "https://example.com/script.sh",
            "https://example.com/flow.zip",
            "https://example.com/flow.tar.gz/",
            "https://example.com/dl?f=flow.tar.gz",
            "https://example.com/flow.TAR.GZ",
            "https://example.com/",
            "https://example.com",
        ] {
            let err = classify(input).unwrap_err();
            assert!(err.contains(".tar.gz"), "{input}: {err}");
            assert!(err.contains("single-file"), "{input}: {err}");
        }
    }

    #[test]
    fn schemes_are_restricted() {
        assert!(classify("ftp://example.com/flow.tar.gz")
            .unwrap_err()
            .contains("tarball URLs must use"));
        assert!(classify("ext://sh -c evil/flow.git")
            .unwrap_err()
            .contains("git sources must use"));
        assert!(classify("ssh://example.com/flow.tar.gz").is_err());
        assert_eq!(
            classify("HTTPS://example.com/flow.git"),
            git("HTTPS://example.com/flow.git", "flow")
        );
    }

    #[test]
    fn errors_never_show_credentials_or_queries() {
        for input in [
            "https://user:s3cret@example.com/flow.zip?token=abc",
            "ftp://user:s3cret@example.com/flow.tgz?token=abc",
            "ext://user:s3cret@example.com/flow.git?token=abc",
            "https://user:s3cret@example.com/a\nb?token=abc",
        ] {
            let err = classify(input).unwrap_err();
            assert!(!err.contains("s3cret") && !err.contains("abc"), "{err}");
            assert!(err.contains("***@example.com"), "{err}");
        }
    }

    #[test]
    fn empty_and_control_characters() {
        assert!(classify("").is_err());
        assert!(classify("org/repo\n").is_err());
    }

    #[test]
    fn url_splitting() {
        let url = split_url("https://u:p@Example.COM:8443/a/b.tgz?q=1&r#frag").unwrap();
        assert_eq!(
            url,
            Url {
                scheme: "https",
                authority: "u:p@Example.COM:8443",
                host: "example.com".to_string(),
                path: "/a/b.tgz",
                query: Some("q=1&r"),
                fragment: Some("frag"),
            }
        );
        let url = split_url("http://[::1]:8080/x.git").unwrap();
        assert_eq!(url.host, "[::1]");
        let url = split_url("file:///tmp/r.git").unwrap();
        assert_eq!((url.authority, url.path), ("", "/tmp/r.git"));
        let url = split_url("https://h#a?b").unwrap();
        assert_eq!((url.path, url.query, url.fragment), ("", None, Some("a?b")));
        assert!(split_url("org/repo").is_none());
        assert!(split_url("1http://x/y").is_none());
        assert!(split_url("git@github.com:org/repo").is_none());
    }

    #[test]
    fn unreserved_decoding_only() {
        assert_eq!(decode_unreserved("a%2Db%5fc%7E%41"), "a-b_c~A");
        assert_eq!(decode_unreserved("a%2Fb%20c%"), "a%2Fb%20c%");
        assert_eq!(decode_unreserved("ä%2d"), "ä-");
        assert_eq!(decode_unreserved("%zz%4"), "%zz%4");
    }
}
