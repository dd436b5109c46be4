//! The configuration file: TOML text read and resolved as `protogate serve --config FILE`
//! does with no other flag (`protogate::check_config`). Nothing panics: every bad file is a
//! ConfigError. Also `parse_duration` on the first line.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = protogate::config::parse_duration(text.lines().next().unwrap_or(""));
    let _ = protogate::check_config(text);
});
