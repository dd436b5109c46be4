//! The active health check (`health_check = true`): the standard `grpc.health.v1.Health/Check`
//! for each service the upstream serves, sent on the endpoint's own connection. An endpoint
//! whose answer is not SERVING (or that does not answer) is ejected, and the probe that brings
//! it back asks the same question (endpoint.rs).

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use super::endpoint::{Conn, Endpoint, ProbeCheck};

const CHECK: &str = "/grpc.health.v1.Health/Check";
/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: u64 = 1;

/// What to ask an endpoint: the services that use it with a health check.
#[derive(Clone, Debug)]
pub(crate) struct Check {
    pub(super) services: Arc<[String]>,
    pub(super) timeout: Duration,
    pub(super) max_response_bytes: usize,
}

impl Check {
    /// This check as the probe of an ejected endpoint asks it (endpoint.rs).
    pub(super) fn probe(&self) -> ProbeCheck {
        let check = self.clone();
        Arc::new(move |endpoint, conn| {
            let check = check.clone();
            Box::pin(async move { check.run(&endpoint, conn).await })
        })
    }

    /// Asks `endpoint`, on `conn`, whether each service is SERVING.
    pub(super) async fn run(
        &self,
        endpoint: &Arc<Endpoint>,
        conn: super::endpoint::Conn,
    ) -> Result<(), String> {
        for service in self.services.iter() {
            self.one(endpoint, conn.clone(), service).await?;
        }
        Ok(())
    }

    async fn one(&self, endpoint: &Arc<Endpoint>, conn: Conn, service: &str) -> Result<(), String> {
        let call = super::exchange::call_on(
            endpoint,
            conn,
            CHECK,
            request(service),
            self.timeout,
            self.max_response_bytes,
        );
        let answer = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| {
                format!(
                    "health check of {service} timed out after {:?}",
                    self.timeout
                )
            })?
            .map_err(|status| format!("health check of {service}: {}", status.message()))?;
        match serving_status(&answer.body) {
            Some(SERVING) => Ok(()),
            Some(status) => Err(format!(
                "health check: {service} is {}",
                match status {
                    0 => "UNKNOWN",
                    2 => "NOT_SERVING",
                    3 => "SERVICE_UNKNOWN",
                    _ => "in an unknown state",
                }
            )),
            None => Err(format!(
                "health check of {service}: the answer does not decode"
            )),
        }
    }
}

/// `HealthCheckRequest { service = 1 }`.
fn request(service: &str) -> Bytes {
    let mut out = BytesMut::with_capacity(service.len() + 3);
    if !service.is_empty() {
        out.put_u8(0x0a);
        put_varint(&mut out, service.len() as u64);
        out.put_slice(service.as_bytes());
    }
    out.freeze()
}

/// `HealthCheckResponse.status` (field 1, an enum; 0 when absent), None when the bytes are
/// not a message.
fn serving_status(mut bytes: &[u8]) -> Option<u64> {
    let mut status = 0;
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        match key & 7 {
            0 => {
                let value = varint(&mut bytes)?;
                if key >> 3 == 1 {
                    status = value;
                }
            }
            1 => bytes = bytes.get(8..)?,
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).ok()?;
                bytes = bytes.get(len..)?;
            }
            5 => bytes = bytes.get(4..)?,
            _ => return None,
        }
    }
    Some(status)
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_and_answer_are_the_health_protocols_messages() {
        assert_eq!(&request("")[..], b"");
        assert_eq!(&request("pkg.Svc")[..], b"\x0a\x07pkg.Svc");
        assert_eq!(serving_status(b""), Some(0));
        assert_eq!(serving_status(b"\x08\x01"), Some(1));
        assert_eq!(serving_status(b"\x08\x02"), Some(2));
        // Unknown fields around it are skipped.
        assert_eq!(serving_status(b"\x12\x01x\x08\x01\x1d\0\0\0\0"), Some(1));
        assert_eq!(serving_status(b"\x08"), None);
        assert_eq!(serving_status(b"\x0f"), None);
    }
}
