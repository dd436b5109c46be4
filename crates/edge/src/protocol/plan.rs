//! [`Plan`]: how one request is read and answered, as its protocol decided from its head.

use std::time::Duration;

use transcode::Format;
use transcode::stream::{Framing, InFraming};

use crate::error::EdgeError;

/// How one request is read and answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The request's format (a request stream: its framing's).
    pub(crate) request: Format,
    /// The Content-Type's format, when it names one we read. Under an HTTP rule a request
    /// without one is taken as JSON (`request`), and a body is refused (415) once it is
    /// known to be non-empty.
    pub(crate) body_type: Option<Format>,
    /// A request stream's framing.
    pub(crate) in_framing: Option<InFraming>,
    /// The answer's format (a response stream: its framing's).
    pub(crate) response: Format,
    /// A response stream's framing.
    pub(crate) out_framing: Option<Framing>,
    /// Accept named nothing we serve: answered in JSON all the same (`accept_fallback`).
    pub(crate) fallback: bool,
    /// The upstream call's deadline: the client's capped by `upstream_timeout` for calls with
    /// one answer; the client's own, if any, for response streams (the pipeline's deadline step).
    pub(crate) deadline: Option<Duration>,
    /// The one request message comes in an envelope (a Connect server stream's).
    pub(crate) enveloped_request: bool,
    /// The coding of request messages flagged compressed in their envelopes (Connect's
    /// `Connect-Content-Encoding`).
    pub(crate) message_coding: Option<crate::coding::Coding>,
}

impl Plan {
    /// A response stream's framing (negotiate sets it for every method that streams its
    /// answers; its absence is a fault of ours, not a default).
    pub(crate) fn out_framing(&self) -> Result<Framing, EdgeError> {
        self.out_framing
            .ok_or_else(|| EdgeError::Internal("no response framing was negotiated".into()))
    }

    /// A request stream's framing (see [`Plan::out_framing`]).
    pub(crate) fn in_framing(&self) -> Result<InFraming, EdgeError> {
        self.in_framing
            .ok_or_else(|| EdgeError::Internal("no request framing was negotiated".into()))
    }
}
