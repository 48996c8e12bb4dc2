//! `sqlx_macros::migrate!` embeds the migrations at compile time: rebuild when they change (a renamed
//! or added file included, which no source file of this crate mentions).
fn main() {
    println!("cargo:rerun-if-changed=../../../migrations");
}
