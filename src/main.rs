mod json;
mod output;

fn main() {
    println!("{}", env!("CARGO_PKG_VERSION"));
}
