//! The naming rules shared by discovery, targets and install (§2.1, §5.3).

/// Script file extensions loopx discovers (§2.1). `.mjs`/`.cjs` are left out on
/// purpose: every JS/TS script must be ESM through the loopx loader (§6.3).
pub const SCRIPT_EXTENSIONS: [&str; 5] = ["sh", "js", "jsx", "ts", "tsx"];

pub fn is_script_extension(ext: &str) -> bool {
    SCRIPT_EXTENSIONS.contains(&ext)
}

/// `[a-zA-Z0-9_][a-zA-Z0-9_-]*` for workflow and script names (§5.3); `:` is
/// excluded by the pattern, which keeps it free as the target delimiter (§4.1).
pub fn is_valid_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Splits a file name into (base name, extension) when the extension is a
/// supported script extension. `.sh` alone is a dotfile, not a script named "".
pub fn split_script_file(file_name: &str) -> Option<(&str, &str)> {
    let dot = file_name.rfind('.')?;
    if dot == 0 {
        return None;
    }
    let (base, ext) = (&file_name[..dot], &file_name[dot + 1..]);
    is_script_extension(ext).then_some((base, ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_names_follow_the_pattern() {
        for ok in ["a", "ralph", "check-ready", "_x", "9lives", "a_b-c", "A"] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a:b", "a.b", "a b", "é", ".hidden", "a/b"] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn script_files_split_on_the_last_dot() {
        assert_eq!(split_script_file("index.sh"), Some(("index", "sh")));
        assert_eq!(split_script_file("a.test.ts"), Some(("a.test", "ts")));
        assert_eq!(split_script_file("x.tsx"), Some(("x", "tsx")));
        assert_eq!(split_script_file("x.mjs"), None);
        assert_eq!(split_script_file("x.cjs"), None);
        assert_eq!(split_script_file("README.md"), None);
        assert_eq!(split_script_file(".sh"), None);
        assert_eq!(split_script_file("noext"), None);
        assert_eq!(split_script_file("x.SH"), None);
    }
}
