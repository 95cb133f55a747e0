//! The naming rules shared by discovery (§5) and install (§10.4): which files
//! are scripts (§2.1) and which workflow and script names are valid (§5.3).

/// §2.1: the supported script extensions, given without the dot (`"sh"`, as
/// `Path::extension` returns it). Case-sensitive: `run.SH` is not a script,
/// and `.mjs`/`.cjs` are deliberately unsupported.
pub fn is_script_extension(ext: &str) -> bool {
    matches!(ext, "sh" | "js" | "jsx" | "ts" | "tsx")
}

/// §5.3: `[a-zA-Z0-9_][a-zA-Z0-9_-]*`, for workflow and script names alike
/// (which also rules out `:`, the target delimiter of §4.1).
pub fn is_valid_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Splits a file name into (script name, extension) when it has a supported
/// extension; the split is at the last dot, as `Path::file_stem`/`extension`
/// do, so `a.b.sh` is the script `a.b` (an invalid name) and a dotfile such as
/// `.sh` has no extension and is not a script.
pub fn split_script_name(file_name: &str) -> Option<(&str, &str)> {
    let dot = file_name.rfind('.')?;
    let (base, ext) = (&file_name[..dot], &file_name[dot + 1..]);
    (!base.is_empty() && is_script_extension(ext)).then_some((base, ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_extensions() {
        for ext in ["sh", "js", "jsx", "ts", "tsx"] {
            assert!(is_script_extension(ext), "{ext}");
        }
        for ext in ["mjs", "cjs", "json", "md", "SH", "Ts", ".sh", "", "bash"] {
            assert!(!is_script_extension(ext), "{ext}");
        }
    }

    #[test]
    fn valid_names() {
        for ok in [
            "a", "index", "my-flow", "_private", "9lives", "A_b-C", "x--",
        ] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a:b", "a.b", "a b", "ä", "a/b", ".hidden", "a\n"] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn splitting_script_file_names() {
        assert_eq!(split_script_name("index.sh"), Some(("index", "sh")));
        assert_eq!(split_script_name("check.tsx"), Some(("check", "tsx")));
        assert_eq!(split_script_name("a.b.ts"), Some(("a.b", "ts")));
        assert_eq!(split_script_name(".sh"), None);
        assert_eq!(split_script_name("README.md"), None);
        assert_eq!(split_script_name("index.mjs"), None);
        assert_eq!(split_script_name("Makefile"), None);
        assert_eq!(split_script_name("schema.json"), None);
    }
}
