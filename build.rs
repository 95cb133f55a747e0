//! Deflates the npm package's script-side files that the binary embeds
//! (src/js_assets.rs) into OUT_DIR: about 70 KB of JavaScript becomes about
//! 20 KB, which keeps the static binary within its 1.5 MB budget
//! (docs/performance.md). loopx inflates them with the same flate2 it
//! uses for `.tar.gz` installs, so no code is added at run time.

use std::io::Write;
use std::path::PathBuf;

use flate2::write::DeflateEncoder;
use flate2::Compression;

/// The embedded files, relative to dist/npm (js_assets::NAMES says the same).
const FILES: &[&str] = &[
    "index.js",
    "api.js",
    "lib/native.js",
    "lib/ustar.js",
    "loader/register.mjs",
    "loader/hooks.mjs",
    "loader/bun-preload.js",
    "loader/tsconfig.json",
];

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for rel in FILES {
        let src = format!("dist/npm/{rel}");
        println!("cargo:rerun-if-changed={src}");
        let data = std::fs::read(&src).unwrap_or_else(|e| panic!("cannot read {src}: {e}"));
        let mut enc = DeflateEncoder::new(Vec::new(), Compression::best());
        enc.write_all(&data).expect("deflate into memory");
        let deflated = enc.finish().expect("deflate into memory");
        let dest = out.join(format!("{}.deflate", rel.replace('/', "_")));
        std::fs::write(&dest, deflated).unwrap_or_else(|e| panic!("cannot write {dest:?}: {e}"));
    }
    println!("cargo:rerun-if-changed=build.rs");
}
