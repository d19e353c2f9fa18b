//! Records how this build was compiled (optimisation level and the rustc flags that matter
//! for speed: profile-guided optimisation, target CPU) for `flashkit bench`, whose figures
//! depend on it (`sim::speed::build_info`; scripts/pgo-build.sh makes such builds).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let flags: Vec<&str> = flags.split('\x1f').filter(|f| !f.is_empty()).collect();
    let opt = std::env::var("OPT_LEVEL").unwrap_or_else(|_| "?".into());
    println!("cargo:rustc-env=FLASHKIT_OPT_LEVEL={opt}");
    // Unit separators cannot appear in an environment value passed on; spaces join them.
    println!("cargo:rustc-env=FLASHKIT_RUSTFLAGS={}", flags.join(" "));
}
