//! API keys (`[[auth.api_keys]]`): the file holds each key's SHA-256 only; a presented key is
//! hashed and compared with every configured hash in constant time, so neither the time of an
//! answer nor the file tells a key.

use std::sync::Arc;

use subtle::ConstantTimeEq;

/// One configured key: the client it names (verified, as a request with it is) and the
/// SHA-256 of the key.
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub client: Arc<super::Verified>,
    pub sha256: [u8; 32],
}

impl ApiKey {
    /// A key from its hex SHA-256 (as `sha256sum` prints it); the error names what is wrong.
    pub fn new(client: &str, sha256_hex: &str) -> Result<ApiKey, String> {
        let hex = sha256_hex.trim();
        if hex.len() != 64 {
            return Err(format!(
                "sha256 must be 64 hex digits (the key's SHA-256, as sha256sum prints it), not {} characters",
                hex.len()
            ));
        }
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("sha256 {hex:?} is not hexadecimal"));
        }
        let mut sha256 = [0u8; 32];
        for (i, byte) in sha256.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("sha256 {hex:?} is not hexadecimal"))?;
        }
        if client.trim().is_empty() || client.trim() != client {
            return Err(format!(
                "client {client:?} is empty or has spaces around it"
            ));
        }
        Ok(ApiKey {
            client: Arc::new(super::Verified::new(
                client,
                super::Proof::ApiKey,
                Vec::new(),
            )),
            sha256,
        })
    }
}

/// The client whose key this is, when one is: every configured hash is compared (constant
/// time each, none skipped), so the answer takes as long whichever key matched.
pub fn find<'a>(keys: &'a [ApiKey], presented: &[u8]) -> Option<&'a Arc<super::Verified>> {
    let digest = ring::digest::digest(&ring::digest::SHA256, presented);
    let mut found = None;
    for key in keys {
        if bool::from(key.sha256.ct_eq(digest.as_ref())) {
            found = Some(&key.client);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_by_their_hash_only() {
        let hex = "6d5dd32a7e9c7a5d03a4a6b3c4e0e34c1e8ef8a8e2d0bb6c3e0d9a5d1f1c7d1c";
        let real = hex_of(ring::digest::digest(&ring::digest::SHA256, b"k-123").as_ref());
        let keys = vec![
            ApiKey::new("other", hex).unwrap(),
            ApiKey::new("billing", &real).unwrap(),
        ];
        assert_eq!(find(&keys, b"k-123").map(|c| &*c.client), Some("billing"));
        assert!(find(&keys, b"k-124").is_none());
        assert!(find(&keys, b"").is_none());
        assert!(
            ApiKey::new("x", "abc")
                .unwrap_err()
                .contains("64 hex digits")
        );
        assert!(
            ApiKey::new("x", &"zz".repeat(32))
                .unwrap_err()
                .contains("not hexadecimal")
        );
        assert!(ApiKey::new(" x", hex).unwrap_err().contains("spaces"));
    }

    fn hex_of(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}
