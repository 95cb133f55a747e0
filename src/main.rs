mod install;
mod names;
mod semver_range;

fn main() {
    println!("{}", env!("CARGO_PKG_VERSION"));
}
